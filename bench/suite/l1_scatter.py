"""Row scatter without conflicts (index_copy along dim 0): copy x, then write src rows at idx."""

import torch
import triton
import triton.language as tl

NAME = "scatter_rows"
DESCRIPTION = ("out = x.index_copy(0, idx, src): x (V, D), src (M, D), idx (M,) distinct int64 row indices. "
               "Done as a flat copy of x, then one program per src row writing it to out[idx[row]].")
CATEGORY = "index"
LEVEL = 1


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def scatter_rows_kernel(src_ptr, idx_ptr, out_ptr, D, stride_src, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    dst = tl.load(idx_ptr + row)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        vals = tl.load(src_ptr + row * stride_src + cols, mask=mask)
        tl.store(out_ptr + dst * stride_out + cols, vals, mask=mask)


def launch(x, src, idx):
    V, D = x.shape
    M = idx.shape[0]
    out = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    scatter_rows_kernel[(M,)](src, idx, out, D, src.stride(0), out.stride(0), BLOCK=512)
    return out


def reference(x, src, idx):
    return x.index_copy(0, idx, src)


def make_inputs(shape, dtype, seed, device):
    V, D, M = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((V, D), generator=g).to(device=device, dtype=dtype)
    src = torch.randn((M, D), generator=g).to(device=device, dtype=dtype)
    idx = torch.randperm(V, generator=g)[:M].to(device=device)
    return (x, src, idx)


def min_bytes(shape, dtype):
    V, D, M = shape
    es = torch.empty((), dtype=dtype).element_size()
    # rows of x that are not overwritten, all of src, indices, and all of out
    return ((V - M) * D + M * D + V * D) * es + M * 8


CHECK_SHAPES = [(50, 300, 37), (1000, 64, 200), (17, 1000, 5)]
BENCH_SHAPES = [(65536, 4096, 32768)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 0.0, "rtol": 0.0},
    torch.float32: {"atol": 0.0, "rtol": 0.0},
}
