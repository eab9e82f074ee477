"""Cheat (2): caches outputs across calls (a dict stored as an attribute of launch itself).
It still launches a tiny kernel on a cache hit so that a launch is seen.
Expected: rejected as caches_outputs (two calls return the same memory: the verifier keeps
every output of a shape alive, and pairs each call with a kernels-off call on the same inputs).

Derived from tests/cpu/verifier/tiny_axpy.py (from examples/add_tiny_block.py); only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl

NAME = "c02d_function_attribute_cache"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y):
    cache = launch.__dict__.setdefault("cache", {})
    key = tuple(x.shape)
    if key not in cache:
        out = torch.empty_like(x)
        n = x.numel()
        axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, 2.5, BLOCK=128, num_warps=1)
        cache[key] = out
    else:
        axpy_kernel[(1,)](x, y, torch.empty_like(x), 0, 2.5, BLOCK=128)
    return cache[key]


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
