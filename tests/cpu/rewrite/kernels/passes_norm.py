"""A multi-pass row kernel written for the tests (two passes over a short row, one row a program; the first pass a
``tl.range`` with keywords): rows_per_program takes its rows on row_resident's one-block sibling; beside the tune,
that rewrite keeps the original for long rows."""
import torch
import triton
import triton.language as tl


@triton.jit
def passes_norm_kernel(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * N
    Y += row * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in tl.range(0, N, BLOCK, num_stages=1):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Y + cols, x - mean, mask=cols < N)


def launch(x):
    y = torch.empty_like(x)
    passes_norm_kernel[(x.shape[0],)](x, y, x.shape[1], 16)
    return y


def reference(x):
    return x - x.mean(dim=1, keepdim=True)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(5, 40), (70, 33)]
BENCH_SHAPES = [(1 << 16, 64)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
