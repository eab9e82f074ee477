"""Counter-example for cheap_math: pow with a runtime exponent and with 0.5 (sqrt is not the same function
at -0. and -inf) stay libdevice calls."""

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

NAME = "pow_general"
DESCRIPTION = "out = |x| ** e + |x| ** 0.5 for a runtime exponent e."


@triton.jit
def pow_general_kernel(x_ptr, out_ptr, n, e, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.abs(tl.load(x_ptr + offs, mask=mask, other=1.0))
    tl.store(out_ptr + offs, libdevice.pow(x, e) + libdevice.pow(x, 0.5), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    pow_general_kernel[(triton.cdiv(n, 1024),)](x, out, n, 1.5, BLOCK=1024)
    return out


def reference(x):
    return x.abs() ** 1.5 + x.abs() ** 0.5


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
