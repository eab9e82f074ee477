"""Showcase task of the eviction_hints family (bench/families/README.md). The largest value of a tensor in two
stages, as reduction libraries write it: one program per 4096-element block stores its block's maximum, then one
program reduces those. Every element is read once, yet the first stage's loads allocate in L2 like data that will
be read again."""

import torch
import triton
import triton.language as tl

NAME = "max_two_stage"
DESCRIPTION = "max(x) over a whole fp32 tensor: per-block maxima, then the maximum of those."


@triton.jit
def block_max_kernel(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    tl.store(part_ptr + pid, tl.max(x, axis=0))


@triton.jit
def final_max_kernel(part_ptr, out_ptr, m, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.load(part_ptr + offs, mask=offs < m, other=-float("inf"))
    tl.store(out_ptr, tl.max(p, axis=0))


def launch(x):
    n = x.numel()
    m = triton.cdiv(n, 4096)
    part = torch.empty((m,), device=x.device, dtype=torch.float32)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    block_max_kernel[(m,)](x, part, n, BLOCK=4096)
    final_max_kernel[(1,)](part, out, m, BLOCK=triton.next_power_of_2(m))
    return out


def reference(x):
    return torch.amax(x)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,), (12289,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
