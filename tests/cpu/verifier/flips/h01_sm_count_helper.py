"""Honest: the rewrite families' pattern, a grid of programs sized to the SM count on CUDA and to a
small constant elsewhere, each program looping over its blocks. Both sides compute the right values."""

import torch
import triton
import triton.language as tl

NAME = "axpy_tiny_block_small"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def _num_sms(t):
    if t.is_cuda:
        return torch.cuda.get_device_properties(t.device).multi_processor_count
    return 4


@triton.jit
def axpy_loop_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, n_blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for b in range(pid, n_blocks, tl.num_programs(0)):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024 if x.is_cuda else 128
    n_blocks = triton.cdiv(n, BLOCK)
    grid = (min(n_blocks, _num_sms(x)),)
    axpy_loop_kernel[grid](x, y, out, n, 2.5, n_blocks, BLOCK=BLOCK, num_warps=1)
    return out


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


def flops(shape, dtype):
    return 2 * shape[0]


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
