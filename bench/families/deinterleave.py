"""Showcase task of the deinterleave family (bench/families/README.md). Complex rotation of interleaved fp16 pairs
(``x[..., 2k]`` real, ``x[..., 2k + 1]`` imaginary, as ``torch.view_as_complex`` lays them out) by a per-row phase:
the kernel reads the real and the imaginary parts as two tensors with a stride of 2 and writes them back the same
way, so each lane moves 2 bytes."""

import torch
import triton
import triton.language as tl

NAME = "complex_rotate_interleaved"
DESCRIPTION = "y = x * exp(i * theta_row) on interleaved (re, im) fp16 pairs."


@triton.jit
def rotate_kernel(x_ptr, theta_ptr, out_ptr, M, K, stride_xm, stride_xk, stride_om, stride_ok,
                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K // 2) * 2   # the real parts: even elements
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    re_mask = (offs_m[:, None] < M) & (offs_k[None, :] < K)
    im_mask = (offs_m[:, None] < M) & (offs_k[None, :] + 1 < K)
    re = tl.load(x_ptrs, mask=re_mask, other=0.0)
    im = tl.load(x_ptrs + 1, mask=im_mask, other=0.0)
    theta = tl.load(theta_ptr + offs_m, mask=offs_m < M, other=0.0)[:, None]
    c = tl.cos(theta)
    s = tl.sin(theta)
    out_re = (re.to(tl.float32) * c - im.to(tl.float32) * s).to(re.dtype)
    out_im = (re.to(tl.float32) * s + im.to(tl.float32) * c).to(re.dtype)
    o_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_k[None, :] * stride_ok
    tl.store(o_ptrs, out_re, mask=re_mask)
    tl.store(o_ptrs + 1, out_im, mask=im_mask)


def rotate(x, theta):
    M, K = x.shape
    out = torch.empty_like(x)
    grid = (triton.cdiv(M, 4), triton.cdiv(K, 256))
    rotate_kernel[grid](x, theta, out, M, K, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                        BLOCK_M=4, BLOCK_K=256)
    return out


def launch(x, theta):
    return rotate(x, theta)


def reference(x, theta):
    z = torch.view_as_complex(x.float().reshape(x.shape[0], -1, 2).contiguous())
    y = z * torch.polar(torch.ones_like(theta), theta)[:, None]
    return torch.view_as_real(y).reshape(x.shape).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    M, K = shape
    x = torch.randn(M, K, generator=gen).to(device=device, dtype=dtype)
    theta = (torch.rand(M, generator=gen) * 6.2832).to(device=device)
    return x, theta


CHECK_SHAPES = [(7, 300), (16, 512), (1, 2)]
BENCH_SHAPES = [(8192, 4096)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 2e-3, "rtol": 2e-3}}
