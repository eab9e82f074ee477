"""Cast fp32 to fp16, one program per 1024 elements."""

import torch
import triton
import triton.language as tl

NAME = "cast_fp32_to_fp16"
DESCRIPTION = "out = x.to(float16) for an fp32 tensor x (round to nearest even)."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def cast_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(tl.float16), mask=mask)


def launch(x):
    out = torch.empty(x.shape, device=x.device, dtype=torch.float16)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    cast_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return x.to(torch.float16)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 100.0).to(device=device, dtype=dtype)
    return (x,)


def min_bytes(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * (4 + 2)


CHECK_SHAPES = [(1000,), (4097,), (65536,)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
