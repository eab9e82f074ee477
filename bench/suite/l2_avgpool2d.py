"""AvgPool2d 2x2, stride 2 on NCHW: one program per 512 output elements, four loads each."""

import torch
import triton
import triton.language as tl

NAME = "avgpool2d"
DESCRIPTION = "out = avg_pool2d(x, kernel_size=2, stride=2) for x (N, C, H, W); odd H or W drop the last row/column."
CATEGORY = "pool"
LEVEL = 2


@triton.jit
def avgpool_kernel(x_ptr, out_ptr, n_out, H, W, OH, OW, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    nc = t // OH
    base = x_ptr + nc * H * W + (oh * 2) * W + ow * 2
    a = tl.load(base, mask=mask).to(tl.float32)
    b = tl.load(base + 1, mask=mask).to(tl.float32)
    c = tl.load(base + W, mask=mask).to(tl.float32)
    d = tl.load(base + W + 1, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, ((a + b + c + d) * 0.25).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    N, C, H, W = x.shape
    OH, OW = H // 2, W // 2
    out = torch.empty((N, C, OH, OW), device=x.device, dtype=x.dtype)
    n_out = out.numel()
    BLOCK = 512
    avgpool_kernel[(triton.cdiv(n_out, BLOCK),)](x, out, n_out, H, W, OH, OW, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.nn.functional.avg_pool2d(x.float(), kernel_size=2, stride=2).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x,)


def min_bytes(shape, dtype):
    N, C, H, W = shape
    es = torch.empty((), dtype=dtype).element_size()
    # only the rows/columns covered by a window must be read
    return (N * C * (H // 2) * 2 * (W // 2) * 2 + N * C * (H // 2) * (W // 2)) * es


def flops(shape, dtype):
    N, C, H, W = shape
    return 4 * N * C * (H // 2) * (W // 2)


CHECK_SHAPES = [(2, 3, 9, 11), (1, 4, 16, 16), (2, 2, 7, 6)]
BENCH_SHAPES = [(64, 128, 128, 128)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.float32: {"atol": 1e-6, "rtol": 1e-6},
}
