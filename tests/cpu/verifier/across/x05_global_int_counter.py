"""Candidate for tiny_axpy.py: a plain int counter rebound with ``global`` (issue 34), branchless.

The source policy refuses ``global`` (``caches_outputs``); with it off, only the run-time state check sees it.
Expected: REJECTED (``state_across_calls``).
"""

import torch
import triton
import triton.language as tl

_CALLS = 0


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
    global _CALLS
    _CALLS += 1
    n_eff = n - (n * 3 // 10) * (_CALLS >= 40)
    BLOCK = 128
    axpy_kernel[(triton.cdiv(n_eff, BLOCK),)](x, y, out, n_eff, 2.5, BLOCK=BLOCK, num_warps=1)
    return out
