"""Elementwise square root over a 2-D tensor, one program per 128 elements."""

import torch
import triton
import triton.language as tl

NAME = "sqrt"
DESCRIPTION = "out = sqrt(x) for non-negative x (M, N), flat indexing, computed in fp32."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def sqrt_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, tl.sqrt(x).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    grid = (triton.cdiv(n, BLOCK),)
    sqrt_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.sqrt(x.float()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g) * 100.0).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 2e-3},
}
