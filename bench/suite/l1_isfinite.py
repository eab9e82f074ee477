"""Elementwise isfinite on data sprinkled with inf, -inf and nan."""

import torch
import triton
import triton.language as tl

NAME = "isfinite"
DESCRIPTION = "out = torch.isfinite(x), bool output; about 10% of x is +inf, -inf or nan."
CATEGORY = "compare"
LEVEL = 1


@triton.jit
def isfinite_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # nan fails x == x; +-inf fails |x| < inf
    finite = (x == x) & (tl.abs(x) < float("inf"))
    tl.store(out_ptr + offs, finite, mask=mask)


def launch(x):
    out = torch.empty(x.shape, device=x.device, dtype=torch.bool)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    isfinite_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.isfinite(x)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 100.0
    u = torch.rand(shape, generator=g)
    x = torch.where(u < 0.04, torch.full_like(x, float("inf")), x)
    x = torch.where((u >= 0.04) & (u < 0.07), torch.full_like(x, float("-inf")), x)
    x = torch.where((u >= 0.07) & (u < 0.10), torch.full_like(x, float("nan")), x)
    return (x.to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,), (300, 37)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
}
