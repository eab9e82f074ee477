"""Candidate for tiny_axpy.py: the counter kept in a default argument, no module-level name (issue 34).

``def launch(x, y, _seen={})``: the dict lives as long as the function; from the 40th call only the first 70% is
computed, branchless. Expected: REJECTED (``state_across_calls``: the runner fingerprints the candidate's functions'
defaults, attributes and closure cells too).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y, _seen={}):
    out = torch.empty_like(x)
    n = x.numel()
    _seen["calls"] = _seen.get("calls", 0) + 1
    n_eff = n - (n * 3 // 10) * (_seen["calls"] >= 40)
    BLOCK = 128
    axpy_kernel[(triton.cdiv(n_eff, BLOCK),)](x, y, out, n_eff, 2.5, BLOCK=BLOCK, num_warps=1)
    return out
