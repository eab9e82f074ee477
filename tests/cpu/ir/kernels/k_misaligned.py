"""Vector scale on a view that starts one element into its storage, with an odd length.

The JIT specializes a pointer as 16-byte divisible only when its address is, and an integer only
when it is a multiple of 16: here neither holds, so the axis analysis cannot prove alignment and
the accesses stay scalar.
"""

import torch
import triton
import triton.language as tl

NAME = "scale_misaligned"
DESCRIPTION = "out = 2 * x where x = buf[1:] (4-byte aligned) and n is odd."


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)  # LOAD-X
    tl.store(out_ptr + offs, 2.0 * x, mask=mask)


def launch(buf):
    x = buf[1:]
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    scale_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=4)
    return out


def reference(buf):
    return 2 * buf[1:]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((shape[0] + 1,), generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [((1 << 22) + 5,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
