"""Candidate for tiny_softmax.py: softmax without the max pass (exp(x) / sum(exp(x))).

Exact for the task's inputs (randn * 3: exp never overflows in float32), NaN once an input is
about 100 (exp overflows to inf, inf / inf). Expected: REJECTED (mismatch at the large-values case).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sumexp_kernel(x_ptr, sum_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=float("-inf"))
        acc += tl.exp(x)
    tl.store(sum_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def normalize_kernel(x_ptr, sum_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    s = tl.load(sum_ptr + row)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * stride + cols, tl.exp(x) / s, mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    row_sum = torch.empty((M,), device=x.device, dtype=torch.float32)
    BLOCK = 256
    row_sumexp_kernel[(M,)](x, row_sum, N, x.stride(0), BLOCK=BLOCK)
    normalize_kernel[(M,)](x, row_sum, out, N, x.stride(0), BLOCK=BLOCK)
    return out
