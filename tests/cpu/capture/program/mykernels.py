"""Two Triton kernels and their launchers: a user's own library, written for the capture tests."""

import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128


@triton.jit
def _scale(x, alpha):
    return x * alpha


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _scale(x, alpha) + y, mask=mask)


def scale_add(x, y, alpha):
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, SCALE_BLOCK),)](x, y, out, n, alpha, BLOCK=SCALE_BLOCK, num_warps=1)
    return out


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x):
    out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=32)
    return out
