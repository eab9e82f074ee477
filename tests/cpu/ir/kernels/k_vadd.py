"""Well-formed vector add: 1024 elements per program, 16-byte vector accesses, 4096 programs."""

import torch
import triton
import triton.language as tl

NAME = "vadd"
DESCRIPTION = "out = x + y over a flat fp32 tensor, BLOCK=1024, num_warps=4."


@triton.jit
def vadd_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)  # LOAD-X
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    vadd_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=4)
    return out


def reference(x, y):
    return x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 22,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
