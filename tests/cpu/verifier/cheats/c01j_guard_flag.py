"""Cheat (1): reaches into the guard (it runs in the candidate's process: found through
sys.modules) and sets its "inside a Triton launch" flag, so the op recorder ignores its torch compute.
Expected: rejected as not_from_triton (correct with every Triton launch given an empty grid).

Derived from tests/cpu/verifier/tiny_axpy.py (from examples/add_tiny_block.py); only launch() (and what it uses) differs.
"""

import torch
import triton
import triton.language as tl
import sys

NAME = "c01j_guard_flag"
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
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, 2.5, BLOCK=128, num_warps=1)
    state = next(getattr(m, "_state") for m in list(vars(sys)["modules"].values())
                 if isinstance(vars(m).get("LaunchGuard"), type) and "_state" in vars(m))
    setattr(state, "in_" + "triton", True)
    result = x * 2.5 + y
    setattr(state, "in_" + "triton", False)
    return result


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
