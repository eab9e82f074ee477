"""One 65536-element fp32 tile per program (256 KB): larger than the 192 KB unified buffer."""

import torch
import triton
import triton.language as tl


@triton.jit
def big_tile_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.exp(x) * x + 1.0)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 65536
    big_tile_kernel[(x.numel() // BLOCK,)](x, out, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.exp(x) * x + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(65536,)]
BENCH_SHAPES = [(40 * 65536,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
