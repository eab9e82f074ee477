"""Swish / SiLU with beta = 1, one program per 512 elements."""

import torch
import triton
import triton.language as tl

NAME = "swish"
DESCRIPTION = "out = x * sigmoid(x) (Swish with beta=1, torch.nn.functional.silu), in fp32."
CATEGORY = "activation"
LEVEL = 2


@triton.jit
def swish_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x * tl.sigmoid(x)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 512
    grid = (triton.cdiv(n, BLOCK),)
    swish_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    return torch.nn.functional.silu(x.float()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3.0).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return 4 * n


CHECK_SHAPES = [(1000,), (4097,), (300, 37)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}
