"""Column sums of a row-major matrix read one column element per lane: lanes are a row apart."""

import torch
import triton
import triton.language as tl

NAME = "col_gather_strided"
DESCRIPTION = "out[j] = 2 * x[j, 0] for j in rows: each lane reads one row, stride = row pitch."


@triton.jit
def strided_kernel(x_ptr, out_ptr, M, stride_m, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    mask = rows < M
    x = tl.load(x_ptr + rows * stride_m, mask=mask)  # LOAD-STRIDED
    tl.store(out_ptr + rows, 2.0 * x, mask=mask)


def launch(x):
    M = x.shape[0]
    out = torch.empty((M,), dtype=x.dtype, device=x.device)
    BLOCK = 1024
    strided_kernel[(triton.cdiv(M, BLOCK),)](x, out, M, x.stride(0), BLOCK=BLOCK, num_warps=4)
    return out


def reference(x):
    return 2 * x[:, 0]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000, 3), (4097, 5)]
BENCH_SHAPES = [(262144, 32)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
