"""Row index_add with repeated indices (embedding-gradient style): clone, then atomic adds per src row."""

import torch
import triton
import triton.language as tl

NAME = "index_add_rows"
DESCRIPTION = ("out = x.index_add(0, idx, src): x (V, D), src (M, D), idx (M,) int64 with repeats (M > V), "
               "so rows collide; one program per src row, atomic adds into out.")
CATEGORY = "index"
LEVEL = 1


@triton.jit
def index_add_kernel(src_ptr, idx_ptr, out_ptr, D, stride_src, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    dst = tl.load(idx_ptr + row)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        vals = tl.load(src_ptr + row * stride_src + cols, mask=mask)
        tl.atomic_add(out_ptr + dst * stride_out + cols, vals, mask=mask)


def launch(x, src, idx):
    V, D = x.shape
    M = idx.shape[0]
    out = x.clone()
    index_add_kernel[(M,)](src, idx, out, D, src.stride(0), out.stride(0), BLOCK=256)
    return out


def reference(x, src, idx):
    return x.index_add(0, idx, src)


def make_inputs(shape, dtype, seed, device):
    V, D, M = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((V, D), generator=g).to(device=device, dtype=dtype)
    src = torch.randn((M, D), generator=g).to(device=device, dtype=dtype)
    idx = torch.randint(0, V, (M,), generator=g).to(device=device)
    return (x, src, idx)


def flops(shape, dtype):
    V, D, M = shape
    return M * D


CHECK_SHAPES = [(50, 300, 137), (100, 64, 500), (17, 1000, 40)]
BENCH_SHAPES = [(32768, 4096, 65536)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-5}}
