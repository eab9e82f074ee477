"""A launcher whose grid is a lambda over the meta-parameters and whose block is a literal keyword."""

import torch
import triton
import triton.language as tl

NAME = "lambda_grid"


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    scale_kernel[grid](x, out, n, BLOCK=256, num_warps=2)
    return out


def reference(x):
    return x * 3.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
