"""Row-wise dot products written with a per-element Python loop inside the kernel."""

import torch
import triton
import triton.language as tl

NAME = "rowwise_dot_scalar_loop"
DESCRIPTION = ("out[m] = sum_n x[m, n] * y[m, n] (e.g. per-token similarity scores), one program per row, the row "
               "walked one element at a time: each iteration loads two scalars, so the whole program issues "
               "2N dependent 4-byte loads instead of a few wide vector loads.")


@triton.jit
def row_dot_kernel(x_ptr, y_ptr, out_ptr, N, stride_x, stride_y):
    row = tl.program_id(0)
    acc = 0.0
    for i in range(N):
        a = tl.load(x_ptr + row * stride_x + i)
        b = tl.load(y_ptr + row * stride_y + i)
        acc += a * b
    tl.store(out_ptr + row, acc)


def launch(x, y):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=x.dtype)
    row_dot_kernel[(M,)](x, y, out, N, x.stride(0), y.stride(0))
    return out


def reference(x, y):
    return (x * y).sum(dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


CHECK_SHAPES = [(3, 100), (8, 333), (5, 1024)]
BENCH_SHAPES = [(16384, 1024)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-4}}
