"""Candidate for tiny_axpy.py: a kernel branch on the program id that no checked launch runs.

``if pid >= 1 << 20`` depends on the program id, so the launcher's evaluation cannot tell which side a
size reaches (it is dynamic); under the interpreter the line trace shows its body never ran.
Expected: REJECTED (unchecked_branch, from the trace).
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
    if pid >= 1048576:
        x = x + 1.0
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, 2.5, BLOCK=BLOCK, num_warps=1)
    return out
