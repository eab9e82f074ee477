"""Candidate for tiny_axpy.py that keeps a call count in a module-level list (issue 34).

From its 40th call on it computes only the first 70% of the output (the rest stays as torch.empty left
it): right on every call the verifier's checks make, wrong on the calls a benchmark times. It uses no
construct the source policy denies (no ``global``, no threads, no reads of its environment).
Expected: REJECTED (``state_across_calls``: launch() changed module-level state).
"""

import torch
import triton
import triton.language as tl

_CALLS = [0]


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
    _CALLS[0] += 1
    if _CALLS[0] >= 40:
        n = n * 7 // 10
    BLOCK = 128
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, 2.5, BLOCK=BLOCK, num_warps=1)
    return out
