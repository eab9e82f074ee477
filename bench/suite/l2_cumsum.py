"""Inclusive prefix sum along each row: one program per row, blocks of 1024 scanned with a running carry."""

import torch
import triton
import triton.language as tl

NAME = "cumsum_rows"
DESCRIPTION = "out = torch.cumsum(x, dim=-1) for x (M, N) in fp32."
CATEGORY = "scan"
LEVEL = 2


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        scan = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + row * stride_out + cols, scan.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    cumsum_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK=1024)
    return out


def reference(x):
    return torch.cumsum(x.double(), dim=-1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((M, N), generator=g).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 8192)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-4}}
