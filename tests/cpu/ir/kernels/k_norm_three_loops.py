"""Row normalization in three loops over the same row: mean, then variance, then normalize."""

import torch
import triton
import triton.language as tl

NAME = "norm_three_loops"
DESCRIPTION = "out = (x - mean) / sqrt(var + eps) per row, reading x three times with masked loads."


@triton.jit
def norm3_kernel(x_ptr, out_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):  # LOOP-1
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(base + cols, mask=cols < N, other=0.0)  # LOAD-1
    mean = tl.sum(acc, axis=0) / N
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):  # LOOP-2
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < N, other=0.0)  # LOAD-2
        d = tl.where(cols < N, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / N + eps)
    for start in range(0, N, BLOCK):  # LOOP-3
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < N, other=0.0)  # LOAD-3
        tl.store(out_ptr + row * stride + cols, (x - mean) * rstd, mask=cols < N)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    norm3_kernel[(M,)](x, out, N, x.stride(0), 1e-5, BLOCK=1024)
    return out


def reference(x):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(7, 1000), (3, 4097)]
BENCH_SHAPES = [(4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
