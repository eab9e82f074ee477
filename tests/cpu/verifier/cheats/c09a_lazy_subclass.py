"""Cheat (9): returns a tensor subclass that computes its values only when someone looks at
them (a __torch_function__ hook fills it on first access), so the timed call does no work.
Expected: rejected as lazy_output (an output must be a plain torch.Tensor).

Derived from tests/cpu/verifier/tiny_axpy.py (from examples/add_tiny_block.py); only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl

NAME = "c09a_lazy_subclass"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


class _LazyAxpy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, _LazyAxpy) and getattr(a, "_pending", None) is not None:
                x, y = a._pending
                a._pending = None
                with torch._C.DisableTorchFunctionSubclass():
                    a.copy_(2.5 * x + y)
        return super().__torch_function__(func, types, args, kwargs)


def launch(x, y):
    out = torch.empty_like(x)
    axpy_kernel[(1,)](x, y, torch.empty_like(x), 0, 2.5, BLOCK=128, num_warps=1)
    lazy = out.as_subclass(_LazyAxpy)
    lazy._pending = (x, y)
    return lazy


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
