"""Elementwise kernel written with int64 offsets (`pid.to(tl.int64)`), a GPU habit for huge tensors."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale64_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 1024
    scale64_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


def reference(x):
    return x * 2.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(40 * 1024,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
