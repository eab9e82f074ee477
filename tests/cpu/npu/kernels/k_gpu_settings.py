"""Clean elementwise kernel launched with GPU tuning knobs (num_warps=8, num_stages=3)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    BLOCK = 1024
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK,
                                                 num_warps=8, num_stages=3)
    return out


def reference(x, y):
    return x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(2))


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(40 * 1024,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
