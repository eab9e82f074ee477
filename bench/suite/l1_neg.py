"""Elementwise negation, one program per 1024 elements."""

import torch
import triton
import triton.language as tl

NAME = "neg"
DESCRIPTION = "out = -x over a flat tensor."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def neg_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, -x, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    neg_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return -x


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    else:
        x = torch.randint(-1000, 1000, shape, generator=g).to(device=device, dtype=dtype)
    return (x,)


CHECK_SHAPES = [(1000,), (4097,), (65536,)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16, torch.int32]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
    torch.int32: {"atol": 0.0, "rtol": 0.0},
}
