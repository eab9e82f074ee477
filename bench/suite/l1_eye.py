"""Identity matrix: a zero-fill kernel, then a kernel writing the diagonal."""

import torch
import triton
import triton.language as tl

NAME = "eye"
DESCRIPTION = ("out = torch.eye(N, M) in x's dtype where (N, M) = x.shape: x only gives the shape and dtype "
               "(its data is not read). Done as fill with zeros, then set the diagonal to one.")
CATEGORY = "memory"
LEVEL = 1


@triton.jit
def zero_kernel(out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def diag_kernel(out_ptr, n_diag, stride_row, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    mask = i < n_diag
    ones = tl.full([BLOCK], 1.0, dtype=out_ptr.dtype.element_ty)
    tl.store(out_ptr + i * stride_row + i, ones, mask=mask)


def launch(x):
    N, M = x.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype)
    n = out.numel()
    BLOCK = 1024
    zero_kernel[(triton.cdiv(n, BLOCK),)](out, n, BLOCK=BLOCK)
    n_diag = min(N, M)
    diag_kernel[(triton.cdiv(n_diag, 128),)](out, n_diag, out.stride(0), BLOCK=128)
    return out


def reference(x):
    N, M = x.shape
    return torch.eye(N, M, device=x.device, dtype=x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x,)


def min_bytes(shape, dtype):
    N, M = shape
    return N * M * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(7, 300), (300, 7), (65, 65), (128, 96)]
BENCH_SHAPES = [(16384, 16384)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
}
