"""Elementwise multiply of a matrix by a row vector broadcast over its rows."""

import torch
import triton
import triton.language as tl

NAME = "mul_broadcast_row"
DESCRIPTION = "out = x * y for x (M, N) and y (N,) broadcast over rows; flat indexing with a modulo for y."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def mul_kernel(x_ptr, y_ptr, out_ptr, n_elements, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs % N, mask=mask)
    tl.store(out_ptr + offs, x * y, mask=mask)


def launch(x, y):
    M, N = x.shape
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 512
    grid = (triton.cdiv(n, BLOCK),)
    mul_kernel[grid](x, y, out, n, N, BLOCK=BLOCK)
    return out


def reference(x, y):
    return x * y


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((M, N), generator=g).to(device=device, dtype=dtype)
    y = torch.randn((N,), generator=g).to(device=device, dtype=dtype)
    return (x, y)


def flops(shape, dtype):
    M, N = shape
    return M * N


def min_bytes(shape, dtype):
    M, N = shape
    return (2 * M * N + N) * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-6},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
}
