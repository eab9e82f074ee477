"""Embedding lookup: one program per token copies its table row in column chunks (fp16)."""

import torch
import triton
import triton.language as tl

NAME = "embedding_lookup_rows"
DESCRIPTION = ("out[t, :] = table[ids[t], :] for fp16 tables, one program per token walking the row in "
               "BLOCK-wide column chunks. The row start comes from a loaded token id and the chunk start from "
               "the loop counter.")


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, out_ptr, D, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        v = tl.load(table_ptr + row * D + cols, mask=mask)
        tl.store(out_ptr + pid * D + cols, v, mask=mask)


def launch(ids, table):
    T = ids.numel()
    D = table.shape[1]
    out = torch.empty((T, D), device=table.device, dtype=table.dtype)
    embedding_kernel[(T,)](ids, table, out, D, BLOCK=512)
    return out


def reference(ids, table):
    return table[ids.long()]


def make_inputs(shape, dtype, seed, device):
    T, V, D = shape
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (T,), generator=g).to(device=device, dtype=torch.int32)
    table = torch.randn((V, D), generator=g).to(device=device, dtype=dtype)
    return (ids, table)


def min_bytes(shape, dtype):
    T, V, D = shape
    return 4 * T + 2 * T * D * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(7, 50, 300), (16, 100, 1000), (5, 20, 1024)]
BENCH_SHAPES = [(65536, 32000, 2048)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 0.0, "rtol": 0.0}}
