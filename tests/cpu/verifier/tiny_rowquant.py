"""A task with two outputs at different scales: an int8 tensor and its float32 per-row scales.

TOLERANCE gives one entry per output (tools/task/module.py ``tolerance``): the int8 values may be off
by one step, the scales only by float32 rounding; the loosest single entry (atol 1) would accept any
scale within 1.0.
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
    tl.store(s_ptr + row, s)


def launch(x):
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.int8)
    s = torch.empty((M,), device=x.device, dtype=torch.float32)
    rowquant_kernel[(M,)](x, q, s, N, BLOCK=triton.next_power_of_2(N))
    return q, s


def reference(x):
    s = x.abs().amax(dim=1) / 127.0
    q = torch.floor(x / s[:, None] + 0.5).to(torch.int8)
    return q, s


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(5, 96), (3, 200)]
BENCH_SHAPES = [(8192, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: [{"atol": 1, "rtol": 0}, {"atol": 0, "rtol": 1e-6}]}
