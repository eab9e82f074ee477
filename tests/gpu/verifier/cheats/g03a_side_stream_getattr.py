"""Cheat (3), GPU: launches the kernel on a side stream obtained through getattr (no
the stream constructor spelled out in the source, so the static rule does not fire).
Expected: rejected as side_stream (the guard checks the current stream at every launch).

Derived from tests/cpu/verifier/tiny_axpy.py (from examples/add_tiny_block.py); only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl

NAME = "g03a_side_stream_getattr"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


_cuda = torch.cuda


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    side = getattr(_cuda, "Str" + "eam")()
    with getattr(_cuda, "str" + "eam")(side):
        axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, 2.5, BLOCK=128, num_warps=1)
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
