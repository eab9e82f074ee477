"""Candidate for tiny_rowquant.py: right int8 values, scales 0.1% too large.

Within the loosest tolerance (atol 1) but not the scales' own (rtol 1e-6). Expected: REJECTED
(mismatch on output 1) with per-output tolerances.
"""
import torch
import triton
import triton.language as tl

NAME = "rowquant_small"
DESCRIPTION = "per-row symmetric int8 quantization: q = floor(x / s + 0.5), s = max|x| / 127."


@triton.jit
def rowquant_kernel(x_ptr, q_ptr, s_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    s = tl.max(tl.abs(x), axis=0) / 127.0
    q = tl.floor(x / s + 0.5)
    tl.store(q_ptr + row * N + cols, q.to(tl.int8), mask=mask)
    tl.store(s_ptr + row, s * 1.001)


def launch(x):
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.int8)
    s = torch.empty((M,), device=x.device, dtype=torch.float32)
    rowquant_kernel[(M,)](x, q, s, N, BLOCK=triton.next_power_of_2(N))
    return q, s
