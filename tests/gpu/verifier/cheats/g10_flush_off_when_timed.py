"""Cheat (10), GPU: honest while verified (few calls); from the 30th call on -- only a timer calls
a launcher that often -- it replaces torch.Tensor.zero_, which the bench uses to flush L2, with a
no-op (through getattr/setattr, so no source rule fires). Expected: the bench job names this
variant as timing_tampering.

Derived from tests/cpu/verifier/tiny_axpy.py; only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl

NAME = "g10_flush_off_when_timed"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=1024."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


_calls = [0]


def launch(x, y):
    _calls[0] += 1
    if _calls[0] == 30:
        setattr(torch.Tensor, "ze" + "ro_", lambda self: self)
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 2.5, BLOCK=1024, num_warps=4)
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
