"""Residual add followed by RMSNorm, as two kernels: an add kernel, then a two-loop RMSNorm kernel."""

import torch
import triton
import triton.language as tl

NAME = "add_rmsnorm"
DESCRIPTION = ("h = x + residual; out = h * rsqrt(mean(h^2, -1) + eps) * weight (eps=1e-6). Returns (out, h). "
               "Done as a flat add kernel writing h, then an RMSNorm kernel reading h twice.")
CATEGORY = "norm"
LEVEL = 2

EPS = 1e-6


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, N, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        tl.store(out_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, residual, weight):
    M, N = x.shape
    h = torch.empty_like(x)
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, residual, h, n, BLOCK=1024)
    rmsnorm_kernel[(M,)](h, weight, out, N, h.stride(0), out.stride(0), EPS, BLOCK=1024)
    return out, h


def reference(x, residual, weight):
    h = (x.float() + residual.float()).to(x.dtype)
    hf = h.float()
    rstd = torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS)
    return (hf * rstd * weight.float()).to(x.dtype), h


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((M, N), generator=g).to(device=device, dtype=dtype)
    residual = (torch.randn((M, N), generator=g) * 2.0).to(device=device, dtype=dtype)
    weight = (1.0 + 0.1 * torch.randn((N,), generator=g)).to(device=device, dtype=dtype)
    return (x, residual, weight)


def flops(shape, dtype):
    M, N = shape
    return 5 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 8192)]
DTYPES = [torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 5e-2, "rtol": 3e-2},
}
