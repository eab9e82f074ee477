"""MaxPool2d 3x3, stride 2, padding 1 on NCHW: one program per 256 output elements, 9 masked loads each."""

import torch
import triton
import triton.language as tl

NAME = "maxpool2d"
DESCRIPTION = "out = max_pool2d(x, kernel_size=3, stride=2, padding=1) for x (N, C, H, W) (a ResNet stem pool)."
CATEGORY = "pool"
LEVEL = 2


@triton.jit
def maxpool_kernel(x_ptr, out_ptr, n_out, H, W, OH, OW, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    nc = t // OH
    acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for kh in tl.static_range(3):
        for kw in tl.static_range(3):
            ih = oh * 2 - 1 + kh
            iw = ow * 2 - 1 + kw
            valid = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(x_ptr + nc * H * W + ih * W + iw, mask=valid, other=float("-inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    N, C, H, W = x.shape
    OH = (H + 2 - 3) // 2 + 1
    OW = (W + 2 - 3) // 2 + 1
    out = torch.empty((N, C, OH, OW), device=x.device, dtype=x.dtype)
    n_out = out.numel()
    BLOCK = 256
    maxpool_kernel[(triton.cdiv(n_out, BLOCK),)](x, out, n_out, H, W, OH, OW, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.nn.functional.max_pool2d(x, kernel_size=3, stride=2, padding=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    N, C, H, W = shape
    return 9 * N * C * ((H - 1) // 2 + 1) * ((W - 1) // 2 + 1)


CHECK_SHAPES = [(2, 3, 9, 11), (1, 4, 16, 16), (2, 2, 7, 7)]
BENCH_SHAPES = [(64, 64, 224, 224)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 0.0, "rtol": 0.0},
    torch.float32: {"atol": 0.0, "rtol": 0.0},
}
