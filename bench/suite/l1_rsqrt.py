"""Elementwise reciprocal square root, one program per 1024 elements."""

import torch
import triton
import triton.language as tl

NAME = "rsqrt"
DESCRIPTION = "out = 1 / sqrt(x) for positive x, computed in fp32."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def rsqrt_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    tl.store(out_ptr + offs, tl.rsqrt(x).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    rsqrt_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.rsqrt(x.float()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g) * 10.0 + 0.05).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n


CHECK_SHAPES = [(1000,), (4097,), (65536,)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 2e-3},
}
