"""Vector add with a tiny block: 128 elements per program, one warp, ~33k programs."""

import torch
import triton
import triton.language as tl

NAME = "vadd_tiny"
DESCRIPTION = "out = x + y, BLOCK=128 and num_warps=1: every program does almost nothing."


@triton.jit
def vadd_tiny_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    vadd_tiny_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=1)
    return out


def reference(x, y):
    return x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 22,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
