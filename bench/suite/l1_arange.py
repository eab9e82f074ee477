"""Arithmetic progression start + i * step written into a new tensor."""

import torch
import triton
import triton.language as tl

NAME = "arange"
DESCRIPTION = ("out[i] = params[0] + i * params[1] for i < x.numel(), in x's dtype: x only gives the length "
               "and dtype (its data is not read); params holds (start, step) as fp32 so no host sync is needed.")
CATEGORY = "memory"
LEVEL = 1


@triton.jit
def arange_kernel(params_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    start = tl.load(params_ptr)
    step = tl.load(params_ptr + 1)
    vals = start + offs.to(tl.float32) * step
    tl.store(out_ptr + offs, vals.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, params):
    out = torch.empty_like(x)
    n = out.numel()
    BLOCK = 512
    grid = (triton.cdiv(n, BLOCK),)
    arange_kernel[grid](params, out, n, BLOCK=BLOCK)
    return out


def reference(x, params):
    n = x.numel()
    i = torch.arange(n, device=x.device, dtype=torch.float64)
    return (params[0].double() + i * params[1].double()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    start = torch.rand((1,), generator=g) * 4.0 - 2.0
    step = torch.rand((1,), generator=g) * 1e-3 + 1e-4
    params = torch.cat([start, step]).to(device=device, dtype=torch.float32)
    return (x, params)


def min_bytes(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size() + 8


CHECK_SHAPES = [(1000,), (4097,), (65536,)]
BENCH_SHAPES = [(1 << 27,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-5}}
