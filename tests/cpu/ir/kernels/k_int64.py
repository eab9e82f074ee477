"""Vector add that widens its offsets to int64 before addressing."""

import torch
import triton
import triton.language as tl

NAME = "vadd_int64"
DESCRIPTION = "out = x + y with offsets computed in int64."


@triton.jit
def vadd_i64_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)  # I64
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    vadd_i64_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
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
