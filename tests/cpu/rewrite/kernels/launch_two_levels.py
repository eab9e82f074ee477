"""A launch two helper calls below launch(), through a local bound to the kernel; the block is a local of the
innermost helper and the grid divides by it."""

import torch
import triton
import triton.language as tl

NAME = "launch_two_levels"


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def _scale_into(x, out):
    n = x.numel()
    BLOCK = 256
    k = scale_kernel
    k[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=2)


def scale(x):
    out = torch.empty_like(x)
    _scale_into(x, out)
    return out


def launch(x):
    return scale(x)


def reference(x):
    return x * 3.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
