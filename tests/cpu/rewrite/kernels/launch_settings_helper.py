"""Row kernels whose settings come from calculate_settings-style helpers: the column block of a looped row sum
is a literal the helper returns; the whole-row softmax gets next_power_of_2(n) and warps chosen by thresholds."""

import torch
import triton
import triton.language as tl

NAME = "launch_settings_helper"


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


def loop_settings(n):
    BLOCK = 128
    return BLOCK, 4


def calculate_settings(n):
    BLOCK = triton.next_power_of_2(n)
    num_warps = 4
    if BLOCK >= 2048:
        num_warps = 8
    return BLOCK, num_warps


def row_stats(x):
    rows, cols = x.shape
    sums = torch.empty(rows, device=x.device, dtype=torch.float32)
    probs = torch.empty_like(x)
    BLOCK, warps = loop_settings(cols)
    row_sum_kernel[(rows,)](x, sums, cols, BLOCK=BLOCK, num_warps=warps)
    BLOCK_N, num_warps = calculate_settings(cols)
    softmax_kernel[(rows,)](x, probs, cols, BLOCK=BLOCK_N, num_warps=num_warps)
    return sums, probs


def launch(x):
    return row_stats(x)


def reference(x):
    return x.sum(dim=1), torch.softmax(x, dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(5, 300), (3, 1100)]
BENCH_SHAPES = [(4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
