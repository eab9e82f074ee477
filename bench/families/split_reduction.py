"""Showcase task of the split_reduction family (bench/families/README.md), written for the issue-37 tests:
the root-mean-square of each row, one program per row walking it in blocks;
the tasks have a few very long rows (most SMs idle)."""

import torch
import triton
import triton.language as tl

NAME = "few_long_rows"


@triton.jit
def row_rms_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += v * v
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, tl.sqrt(total / N))


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=torch.float32)
    row_rms_kernel[(M,)](x, out, N, x.stride(0), BLOCK=256)
    return out


def reference(x):
    return torch.sqrt((x.float() ** 2).mean(-1))


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(3, 5000), (2, 777)]
BENCH_SHAPES = [(8, 1 << 22)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
