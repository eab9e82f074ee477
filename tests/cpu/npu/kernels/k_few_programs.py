"""Masked elementwise kernel with a large block: 16384 elements / BLOCK 4096 = 4 programs for the 40
vector cores of an Ascend910B4 (ascend_too_few_programs -> split_blocks_for_cores)."""

import torch
import triton
import triton.language as tl


@triton.jit
def axpb_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 3.0 + 1.0, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 4096
    axpb_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


def reference(x):
    return x * 3.0 + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(10000,), (16384,)]
BENCH_SHAPES = [(16384,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
