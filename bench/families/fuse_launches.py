"""Residual add, GELU and gating written as three elementwise kernels chained through temporaries."""

import math

import torch
import triton
import triton.language as tl

NAME = "residual_gelu_gate_3launch"
DESCRIPTION = ("out = gelu(x + r) * g (erf GELU), written as three elementwise kernels -- residual add, GELU, "
               "gate -- each reading and writing a full-size temporary: 8 tensor passes instead of 4.")


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def mul_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * b, mask=mask)


def launch(x, r, g):
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    h = torch.empty_like(x)
    add_kernel[grid](x, r, h, n, BLOCK=BLOCK)
    a = torch.empty_like(x)
    gelu_kernel[grid](h, a, n, BLOCK=BLOCK)
    out = torch.empty_like(x)
    mul_kernel[grid](a, g, out, n, BLOCK=BLOCK)
    return out


def reference(x, r, g):
    return torch.nn.functional.gelu((x + r).float()).to(x.dtype) * g


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(3))


def min_bytes(shape, dtype):
    return 4 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(1000,), (4097,), (3, 1111)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
