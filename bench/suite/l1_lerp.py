"""Elementwise linear interpolation with a tensor weight, one program per 256 elements."""

import torch
import triton
import triton.language as tl

NAME = "lerp"
DESCRIPTION = "out = start + weight * (end - start) (torch.lerp with a tensor weight), computed in fp32."
CATEGORY = "elementwise"
LEVEL = 1


@triton.jit
def lerp_kernel(start_ptr, end_ptr, weight_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    s = tl.load(start_ptr + offs, mask=mask).to(tl.float32)
    e = tl.load(end_ptr + offs, mask=mask).to(tl.float32)
    w = tl.load(weight_ptr + offs, mask=mask).to(tl.float32)
    out = s + w * (e - s)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def launch(start, end, weight):
    out = torch.empty_like(start)
    n = start.numel()
    BLOCK = 256
    grid = (triton.cdiv(n, BLOCK),)
    lerp_kernel[grid](start, end, weight, out, n, BLOCK=BLOCK)
    return out


def reference(start, end, weight):
    return torch.lerp(start.float(), end.float(), weight.float()).to(start.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    start = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    end = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    weight = torch.rand(shape, generator=g).to(device=device, dtype=dtype)
    return (start, end, weight)


def flops(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return 3 * n


CHECK_SHAPES = [(1000,), (4097,), (129, 65)]
BENCH_SHAPES = [(1 << 26,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
