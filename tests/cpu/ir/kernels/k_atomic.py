"""Global sum where every program adds its partial sum into one float with an atomic."""

import torch
import triton
import triton.language as tl

NAME = "sum_atomic"
DESCRIPTION = "out = x.sum() via one tl.atomic_add per program into a single scalar."


@triton.jit
def sum_atomic_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n_elements, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))  # ATOMIC


def launch(x):
    out = torch.zeros((1,), dtype=torch.float32, device=x.device)
    n = x.numel()
    sum_atomic_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


def reference(x):
    return x.float().sum().reshape(1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 22,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-2, "rtol": 1e-4}}
