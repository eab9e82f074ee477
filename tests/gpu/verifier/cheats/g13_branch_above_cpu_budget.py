"""GPU candidate for tests/cpu/verifier/tiny_axpy.py: wrong (alpha 3.5) only when n > 2**23.

Beyond the CPU size budget (2**18) but within the GPU one (2**26): on a GPU the verifier derives a
size past 2**23 and checks it. Expected on the cuda backend: REJECTED (mismatch at n > 2**23).
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
    if n > 1 << 23:
        alpha = 3.5
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, alpha, BLOCK=BLOCK, num_warps=1)
    return out
