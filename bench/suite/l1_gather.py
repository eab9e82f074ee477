"""Row gather (index_select along dim 0 / embedding lookup): one program per output row."""

import torch
import triton
import triton.language as tl

NAME = "gather_rows"
DESCRIPTION = ("out = x[idx] = torch.index_select(x, 0, idx) for a table x (V, D) and int64 indices idx (M,) "
               "(an embedding lookup); the number of looked-up rows M varies.")
CATEGORY = "index"
LEVEL = 1
DYNAMIC = True


@triton.jit
def gather_rows_kernel(x_ptr, idx_ptr, out_ptr, D, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src = tl.load(idx_ptr + row)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        vals = tl.load(x_ptr + src * stride_x + cols, mask=mask)
        tl.store(out_ptr + row * stride_out + cols, vals, mask=mask)


def launch(x, idx):
    V, D = x.shape
    M = idx.shape[0]
    out = torch.empty((M, D), device=x.device, dtype=x.dtype)
    BLOCK = 256
    gather_rows_kernel[(M,)](x, idx, out, D, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out


def reference(x, idx):
    return torch.index_select(x, 0, idx)


def make_inputs(shape, dtype, seed, device):
    V, D, M = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((V, D), generator=g).to(device=device, dtype=dtype)
    idx = torch.randint(0, V, (M,), generator=g).to(device=device)
    return (x, idx)


def min_bytes(shape, dtype):
    V, D, M = shape
    es = torch.empty((), dtype=dtype).element_size()
    # each gathered row read once, each output row written once, indices read once
    return 2 * M * D * es + M * 8


CHECK_SHAPES = [(50, 300, 37), (1000, 64, 200), (17, 1000, 5)]
BENCH_SHAPES = [(65536, 4096, 16384), (65536, 4096, 32768), (32000, 8192, 20000)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 0.0, "rtol": 0.0},
    torch.float32: {"atol": 0.0, "rtol": 0.0},
}
