"""Scatter out[idx[i]] = x[i]: the indirect store becomes a scalar loop with a per-element guard."""

import torch
import triton
import triton.language as tl


@triton.jit
def scatter_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + idx, x, mask=m)


def launch(x, idx):
    out = torch.zeros_like(x)
    BLOCK = 1024
    scatter_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, idx, out, x.numel(), BLOCK=BLOCK)
    return out


def reference(x, idx):
    return torch.zeros_like(x).index_put_((idx,), x)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    idx = torch.randperm(shape[0], generator=g).to(device)
    return (x, idx)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(40 * 1024,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
