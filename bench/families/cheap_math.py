"""Showcase task of the cheap_math family (bench/families/README.md). libdevice pow with small integer exponents (cheap_math's motivating case) next to one it must keep."""

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

NAME = "pow_poly"
DESCRIPTION = "out = x**2 + 0.5 * y**3 + x**4, through libdevice.pow."


@triton.jit
def pow_poly_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    sq = libdevice.pow(x, 2.0)  # POW-2
    cube = tl.extra.cuda.libdevice.pow(y.to(tl.float32), 3)
    q = libdevice.pow(x, 4)
    tl.store(out_ptr + offs, sq + 0.5 * cube + q, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    pow_poly_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


def reference(x, y):
    return x * x + 0.5 * y ** 3 + x ** 4


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(2))


CHECK_SHAPES = [(1000,), (4099,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
