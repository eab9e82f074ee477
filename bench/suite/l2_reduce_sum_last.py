"""Sum over the last dim: one program per row, looping over the row in blocks of 1024."""

import torch
import triton
import triton.language as tl

NAME = "reduce_sum_last"
DESCRIPTION = "out = x.sum(-1) for x (M, N), fp32 accumulation, output in x's dtype."
CATEGORY = "reduce"
LEVEL = 2


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=x.dtype)
    row_sum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=1024)
    return out


def reference(x):
    return x.float().sum(-1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((M, N), generator=g) + 0.1).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(32768, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-3, "rtol": 1e-4},
    torch.float16: {"atol": 5e-2, "rtol": 1e-2},
}
