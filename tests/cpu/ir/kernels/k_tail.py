"""Vector add with 16 warps per program and a grid of a wave and a bit."""

import torch
import triton
import triton.language as tl

NAME = "vadd_tail"
DESCRIPTION = "out = x + y with BLOCK=4096, num_warps=16: 4 programs fit per SM, 600 programs."


@triton.jit
def vadd_tail_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def launch(x, y):
    out = torch.empty_like(x)
    BLOCK = 4096
    assert x.numel() % BLOCK == 0
    vadd_tail_kernel[(x.numel() // BLOCK,)](x, y, out, BLOCK=BLOCK, num_warps=16)
    return out


def reference(x, y):
    return x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(4096,), (8192,)]
BENCH_SHAPES = [(4096 * 600,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
