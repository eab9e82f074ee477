"""A launcher that fails after its first kernel: the capture keeps that kernel and reports the error."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    raise ValueError("launcher bug after the first kernel")


def reference(x):
    return x.clone()


def make_inputs(shape, dtype, seed, device):
    return (torch.zeros(shape, dtype=dtype, device=device),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(4096,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
