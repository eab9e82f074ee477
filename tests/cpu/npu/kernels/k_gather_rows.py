"""Embedding-style row gather: whole rows at loaded indices; triton-to-unstructure splits it into a
per-row loop (ExtractedLoadOrStore)."""

import torch
import triton
import triton.language as tl


@triton.jit
def embed_kernel(table_ptr, idx_ptr, out_ptr, n, D: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    m = rows < n
    idx = tl.load(idx_ptr + rows, mask=m, other=0)
    cols = tl.arange(0, D)
    vals = tl.load(table_ptr + idx[:, None] * D + cols[None, :])
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], vals, mask=m[:, None])


def launch(table, idx):
    D = table.shape[1]
    out = torch.empty((idx.numel(), D), dtype=table.dtype, device=table.device)
    BLOCK = 32
    embed_kernel[(triton.cdiv(idx.numel(), BLOCK),)](table, idx, out, idx.numel(), D=D, BLOCK=BLOCK)
    return out


def reference(table, idx):
    return table[idx]


def make_inputs(shape, dtype, seed, device):
    n, vocab, d = shape
    g = torch.Generator().manual_seed(seed)
    table = torch.randn((vocab, d), generator=g).to(device=device, dtype=dtype)
    idx = torch.randint(0, vocab, (n,), generator=g).to(device)
    return (table, idx)


CHECK_SHAPES = [(100, 50, 64)]
BENCH_SHAPES = [(1280, 1000, 64)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
