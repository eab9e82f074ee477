"""addcmul composed from two simpler kernels: a product kernel, then a scaled-add kernel."""

import torch
import triton
import triton.language as tl

NAME = "addcmul"
DESCRIPTION = "out = x + 0.5 * t1 * t2 (torch.addcmul with value=0.5), done as tmp = t1 * t2 then out = x + 0.5 * tmp."
CATEGORY = "elementwise"
LEVEL = 1

VALUE = 0.5


@triton.jit
def mul_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * b, mask=mask)


@triton.jit
def add_scaled_kernel(x_ptr, t_ptr, out_ptr, n_elements, value, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    t = tl.load(t_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + value * t).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, t1, t2):
    n = x.numel()
    tmp = torch.empty_like(t1)
    out = torch.empty_like(x)
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    mul_kernel[grid](t1, t2, tmp, n, BLOCK=BLOCK)
    add_scaled_kernel[grid](x, tmp, out, n, VALUE, BLOCK=BLOCK)
    return out


def reference(x, t1, t2):
    return torch.addcmul(x.float(), t1.float(), t2.float(), value=VALUE).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    t1 = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    t2 = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, t1, t2)


def flops(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return 3 * n


CHECK_SHAPES = [(1000,), (4097,), (300, 37)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
