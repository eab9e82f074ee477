"""Elementwise isinf on data sprinkled with inf, -inf and nan, one program per 256 elements."""

import torch
import triton
import triton.language as tl

NAME = "isinf"
DESCRIPTION = "out = torch.isinf(x), bool output; about 10% of x is +inf, -inf or nan (nan is not inf)."
CATEGORY = "compare"
LEVEL = 1


@triton.jit
def isinf_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    is_inf = (x == float("inf")) | (x == float("-inf"))
    tl.store(out_ptr + offs, is_inf, mask=mask)


def launch(x):
    out = torch.empty(x.shape, device=x.device, dtype=torch.bool)
    n = x.numel()
    BLOCK = 256
    grid = (triton.cdiv(n, BLOCK),)
    isinf_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.isinf(x)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 100.0
    u = torch.rand(shape, generator=g)
    x = torch.where(u < 0.04, torch.full_like(x, float("inf")), x)
    x = torch.where((u >= 0.04) & (u < 0.07), torch.full_like(x, float("-inf")), x)
    x = torch.where((u >= 0.07) & (u < 0.10), torch.full_like(x, float("nan")), x)
    return (x.to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,), (300, 37)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
}
