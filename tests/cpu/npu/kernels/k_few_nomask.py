"""The unmasked twin of k_few_programs: 4 programs, but no masks, so a smaller block is not proposed
(counter-example for split_blocks_for_cores)."""

import torch
import triton
import triton.language as tl


@triton.jit
def axpb_nomask_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * 3.0 + 1.0)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 4096
    axpb_nomask_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, BLOCK=BLOCK)
    return out


def reference(x):
    return x * 3.0 + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(16384,)]
BENCH_SHAPES = [(16384,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
