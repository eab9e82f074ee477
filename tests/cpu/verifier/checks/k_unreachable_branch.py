"""Candidate for tiny_axpy.py: a branch for n > 2**30 that is wrong (adds 1.0), right otherwise.

No size the verifier may check on the CPU (nor the GPU bench shape, 2**24) reaches the branch, so
its code is never checked: the candidate must not be called verified. Expected: REJECTED
(unchecked_branch).
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


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    alpha = 2.5
    if n > 1 << 30:
        alpha = 3.5
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, alpha, BLOCK=BLOCK, num_warps=1)
    return out
