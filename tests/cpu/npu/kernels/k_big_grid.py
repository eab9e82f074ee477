"""Tiny 8-element blocks over a 1M-element tensor: 131072 programs, over the 65535 launch limit."""

import torch
import triton
import triton.language as tl


@triton.jit
def tiny_block_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + 1.0, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 8
    tiny_block_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


def reference(x):
    return x + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
