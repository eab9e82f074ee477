"""Candidate for tiny_axpy.py: an EVEN fast path (no mask when n is a multiple of BLOCK) that is right (control).

Both branches are right. No listed size (1000, 4097) is a multiple of
BLOCK=1024, so only the masked branch runs at CHECK_SHAPES. Expected: PASSES, with EVEN reached true at a
derived size.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
        tl.store(out_ptr + offs, alpha * x + y)
    else:
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    EVEN = n % BLOCK == 0
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, 2.5, BLOCK=BLOCK, EVEN=EVEN, num_warps=4)
    return out
