"""Showcase task of the grid_to_cores family (bench/families/README.md). A grid-stride kernel launched on a fixed 32 programs (grid_to_cores' motivating case)."""

import torch
import triton
import triton.language as tl

NAME = "fixed_programs"
DESCRIPTION = "out = relu(x) over tiles, each program striding by the program count; 32 programs always."

NUM_PROGRAMS = 32


@triton.jit
def relu_tiles_kernel(x_ptr, out_ptr, n, num_tiles, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for t in range(pid, num_tiles, tl.num_programs(0)):
        offs = t * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def _relu(x):
    out = torch.empty_like(x)
    n = x.numel()
    relu_tiles_kernel[(NUM_PROGRAMS,)](x, out, n, triton.cdiv(n, 256), BLOCK=256)  # GRID
    return out


def launch(x):
    return _relu(x)


def reference(x):
    return torch.relu(x)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(100000,), (777,)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
