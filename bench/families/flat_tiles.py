"""Showcase task of the flat_tiles family (bench/families/README.md), written for the issue-37 tests:
a transpose as a new user writes it, 1-D programs over the flat index split by
// and %: the load is coalesced, the store a column of the output per warp."""

import torch
import triton
import triton.language as tl

NAME = "flat_transpose"


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    r = offs // N
    c = offs % N
    v = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + c * M + r, v, mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype)
    BLOCK = 1024
    transpose_kernel[(triton.cdiv(M * N, BLOCK),)](x, out, M, N, BLOCK=BLOCK)
    return out


def reference(x):
    return x.t().contiguous()


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(100, 37), (129, 64)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
