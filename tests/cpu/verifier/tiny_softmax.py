"""The softmax original the adversarial suite attacks: examples/softmax_three_pass.py with tiny shapes.

Three kernels (row max, row sum of exp, normalize) as in the example; CHECK_SHAPES are small so a
verification under the Triton interpreter takes a few seconds. The verifier uses THIS file's
reference, make_inputs, shapes and tolerances; a cheat file supplies only its launch().
"""

import torch
import triton
import triton.language as tl

NAME = "softmax_three_pass_small"
DESCRIPTION = "softmax over the last dim of a (M, N) matrix in three passes (tiny check shapes)."


@triton.jit
def row_max_kernel(x_ptr, max_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=float("-inf"))
        acc = tl.maximum(acc, x)
    tl.store(max_ptr + row, tl.max(acc, axis=0))


@triton.jit
def row_sumexp_kernel(x_ptr, max_ptr, sum_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.load(max_ptr + row)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=float("-inf"))
        acc += tl.exp(x - m)
    tl.store(sum_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def normalize_kernel(x_ptr, max_ptr, sum_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.load(max_ptr + row)
    s = tl.load(sum_ptr + row)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * stride + cols, tl.exp(x - m) / s, mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    row_max = torch.empty((M,), device=x.device, dtype=torch.float32)
    row_sum = torch.empty((M,), device=x.device, dtype=torch.float32)
    BLOCK = 256
    row_max_kernel[(M,)](x, row_max, N, x.stride(0), BLOCK=BLOCK)
    row_sumexp_kernel[(M,)](x, row_max, row_sum, N, x.stride(0), BLOCK=BLOCK)
    normalize_kernel[(M,)](x, row_max, row_sum, out, N, x.stride(0), BLOCK=BLOCK)
    return out


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).mul_(3.0).to(device=device, dtype=dtype),)


def min_bytes(shape, dtype):
    M, N = shape
    return 2 * M * N * torch.empty((), dtype=dtype).element_size()


def flops(shape, dtype):
    M, N = shape
    return 4 * M * N


CHECK_SHAPES = [(4, 300), (3, 513)]
BENCH_SHAPES = [(8192, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-4}}
