"""Candidate for tiny_axpy.py: from its 40th call it launches nothing at all (issue 34; the variant the issue
says only ``faster_than_roofline`` caught on the H200). The counter is an attribute of a module-level object.
Expected: REJECTED (``state_across_calls``; its branch on the counter is dynamic and its true side never runs in a
checked call: ``unchecked_branch`` without the state check).
"""

import torch
import triton
import triton.language as tl


class _Count:
    calls = 0


_STATE = _Count()


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
    _STATE.calls += 1
    if _STATE.calls >= 40:
        return out
    BLOCK = 128
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, 2.5, BLOCK=BLOCK, num_warps=1)
    return out
