"""Three small scaling kernels launched one after another, each on a few thousand elements."""

import torch
import triton
import triton.language as tl

NAME = "many_small_launches"
DESCRIPTION = "outs[i] = 2 * xs[i] for 3 tensors of 4096 elements: three launches of 4 programs."


@triton.jit
def scale_small_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch(*xs):
    outs = []
    for x in xs:
        out = torch.empty_like(x)
        scale_small_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)  # LAUNCH
        outs.append(out)
    return tuple(outs)


def reference(*xs):
    return tuple(2 * x for x in xs)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3))


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(4096,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
