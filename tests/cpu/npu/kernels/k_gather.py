"""Gather out[i] = x[idx[i]]: the indirect load becomes a scalar loop (DiscreteMemAccess); 4 programs."""

import torch
import triton
import triton.language as tl


@triton.jit
def gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    x = tl.load(x_ptr + idx, mask=m)
    tl.store(out_ptr + offs, x, mask=m)


def launch(x, idx):
    out = torch.empty(idx.shape, dtype=x.dtype, device=x.device)
    BLOCK = 1024
    gather_kernel[(triton.cdiv(idx.numel(), BLOCK),)](x, idx, out, idx.numel(), BLOCK=BLOCK)
    return out


def reference(x, idx):
    return x[idx]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    idx = torch.randint(0, shape[0], shape, generator=g).to(device)
    return (x, idx)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(4096,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
