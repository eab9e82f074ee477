"""Candidate for tiny_axpy.py: exact up to the largest listed size, off by 10 beyond it (n=5000).

No branch: the error is folded into the kernel's arithmetic, so only a size larger than every
CHECK_SHAPES entry (1000, 4097) shows it. Expected: REJECTED (mismatch at the derived larger size).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, bias, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y + bias, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    bias = 10.0 * float(n > 4097)
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, 2.5, bias, BLOCK=BLOCK, num_warps=1)
    return out
