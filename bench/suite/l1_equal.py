"""Elementwise equality (torch.eq) producing a bool tensor."""

import torch
import triton
import triton.language as tl

NAME = "equal"
DESCRIPTION = "out = (x == y) elementwise, bool output; about half the elements are equal."
CATEGORY = "compare"
LEVEL = 1


@triton.jit
def eq_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x == y, mask=mask)


def launch(x, y):
    out = torch.empty(x.shape, device=x.device, dtype=torch.bool)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    eq_kernel[grid](x, y, out, n, BLOCK=BLOCK)
    return out


def reference(x, y):
    return torch.eq(x, y)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=g)
        other = torch.randn(shape, generator=g)
    else:
        x = torch.randint(-50, 50, shape, generator=g)
        other = torch.randint(-50, 50, shape, generator=g)
    same = torch.rand(shape, generator=g) < 0.5
    y = torch.where(same, x, other)
    return (x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype))


CHECK_SHAPES = [(1000,), (4097,), (300, 37)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16, torch.int32]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
    torch.int32: {"atol": 0.0, "rtol": 0.0},
}
