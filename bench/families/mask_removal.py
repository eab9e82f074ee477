"""Per-row sum of squares over a (M, N) fp16 matrix, tiles of rows walked along N with bound masks everywhere."""

import torch
import triton
import triton.language as tl

NAME = "row_sumsq_masked_tiles"
DESCRIPTION = ("out[m] = sum_n x[m, n]^2 in fp32 (the statistic of an RMS norm or a gradient-norm clip), "
               "ROWS rows per program, a loop over N in BLOCK_N-wide steps; every load is masked on both "
               "the row and the column bound although the model's shapes are multiples of the blocks.")


@triton.jit
def row_sumsq_kernel(x_ptr, out_ptr, M, N, stride_m, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=rows < M)


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=torch.float32)
    ROWS, BLOCK_N = 4, 512
    row_sumsq_kernel[(triton.cdiv(M, ROWS),)](x, out, M, N, x.stride(0), ROWS=ROWS, BLOCK_N=BLOCK_N)
    return out


def reference(x):
    return (x.float() ** 2).sum(dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


def min_bytes(shape, dtype):
    M, N = shape
    return M * N * torch.empty((), dtype=dtype).element_size() + 4 * M


CHECK_SHAPES = [(8, 1024), (5, 700), (16, 2048)]
BENCH_SHAPES = [(32768, 8192)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-3}}
