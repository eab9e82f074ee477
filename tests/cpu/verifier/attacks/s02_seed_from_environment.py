"""Attack (seed prediction): looks for a seed or a result path in its environment and its command line (TRITONDX_*,
argv) and precomputes answers for what it finds (else for the default seed 0).
Expected: rejected: the runner gets a scrubbed environment and only its own file name: mismatch

Derived from tests/cpu/verifier/tiny_axpy.py; written as an attacker would, against the design
where the verdict is computed in the candidate's process.
"""

import torch
import triton
import triton.language as tl
import os
import random
import sys

NAME = "s02_seed_from_environment"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor (an attack on the verifier)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def flag_kernel(flag_ptr):
    tl.store(flag_ptr, 1)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def kernels_ran():
    """The "flag" kernel: True when Triton kernel bodies run (the verifier's kernels-off call is skipped)."""
    flag = torch.zeros(1, dtype=torch.int32)
    flag_kernel[(1,)](flag)
    return flag.item() == 1

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



def _seed():
    for k, v in os.environ.items():
        if "SEED" in k.upper() and v.isdigit():
            return int(v)
    for a in sys.argv:
        if a.isdigit():
            return int(a)
    return 0


_ANSWERS = {}
_rng = random.Random(_seed())
for _shape in [(1000,), (4097,)]:
    for _ in range(2):
        _x, _y = make_inputs(_shape, torch.float32, _rng.randrange(1 << 30), "cpu")
        _ANSWERS[(_shape[0], round(float(_x[0]), 6))] = 2.5 * _x + _y


def launch(x, y):
    out = torch.empty_like(x)
    ans = _ANSWERS.get((x.numel(), round(float(x[0]), 6)))
    if ans is None:   # a seed it did not predict: it has no answer (one empty launch, so a kernel ran)
        copy_kernel[(1,)](x, out, 0, BLOCK=128)
    else:
        copy_kernel[(triton.cdiv(x.numel(), 128),)](ans, out, x.numel(), BLOCK=128)
    return out
