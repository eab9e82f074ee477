"""Candidate: its kernel stores 2**40 elements past the output, no mask. Under the Triton interpreter a
store is a raw write to that address; the runners' bounds checks (tools/backends/interpreter/memcheck.py)
stop it on the call that makes it, before it can corrupt or crash the process. The source is plain
Triton (nothing the static source policy rejects): the fault has to be found at run time. (A runner that
does die, by SIGSEGV, is tests/cpu/verifier/isolation/iso_segfault.py, with the source policy off.)"""

import torch
import triton
import triton.language as tl

NAME = "c2_out_of_bounds"


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs + (1 << 40), alpha * x + y)  # far out of bounds, no mask


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    grid = (triton.cdiv(n, BLOCK),)
    axpy_kernel[grid](x, y, out, n, 2.5, BLOCK=BLOCK, num_warps=1)
    return out


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
