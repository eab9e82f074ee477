"""Showcase task of the tile_2d family (bench/families/README.md). A naive transpose: one program per input row, the whole row as one block; the store walks a column of
the output (lanes M elements apart): tile_2d's motivating case."""

import torch
import triton
import triton.language as tl

NAME = "row_transpose"
DESCRIPTION = "out = (2 * x).t().contiguous(), one program per row of x."


@triton.jit
def row_transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=mask)
    tl.store(out_ptr + cols * M + row, 2.0 * v, mask=mask)  # STORE-T


def _transpose(x):
    M, N = x.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype)
    row_transpose_kernel[(M,)](x, out, M, N, BLOCK_N=triton.next_power_of_2(N))
    return out


def launch(x):
    return _transpose(x)


def reference(x):
    return (2 * x).t().contiguous()


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(70, 200), (33, 64)]
BENCH_SHAPES = [(4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
