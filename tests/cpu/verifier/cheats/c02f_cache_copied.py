"""Cheat (2): caches the first output per shape and serves later calls a fresh copy of it made by
a Triton copy kernel (fresh memory every call, so sharing memory gives nothing away).
Expected: rejected as caches_outputs: the output equals the reference of an EARLIER seed, not
of this one (with the kernels-off call first it is a plain mismatch instead: the cache then
holds the poison).

Derived from tests/cpu/verifier/tiny_axpy.py (from examples/add_tiny_block.py); only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl

NAME = "c02f_cache_copied"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


_CACHE = {}


def launch(x, y):
    n = x.numel()
    key = tuple(x.shape)
    if key not in _CACHE:
        out = torch.empty_like(x)
        axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, 2.5, BLOCK=128, num_warps=1)
        _CACHE[key] = out
    served = torch.empty_like(x)
    copy_kernel[(triton.cdiv(n, 1024),)](_CACHE[key], served, n, BLOCK=1024)
    return served


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
