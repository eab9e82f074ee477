"""Row sums of a short, wide matrix: one program per row, 48 rows for 132 SMs."""

import torch
import triton
import triton.language as tl

NAME = "row_sum_small_grid"
DESCRIPTION = "out[i] = sum(x[i, :]) for a (48, 4096) matrix; the grid has 48 programs."


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):  # LOOP
        acc += tl.load(x_ptr + row * stride + start + cols)  # LOAD-ROW
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), dtype=torch.float32, device=x.device)
    BLOCK = 1024
    assert N % BLOCK == 0
    row_sum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=BLOCK, num_warps=4)
    return out


def reference(x):
    return x.float().sum(1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(3, 1024), (5, 2048)]
BENCH_SHAPES = [(48, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
