"""Fill a new tensor with a value read from a one-element tensor (torch.full_like)."""

import torch
import triton
import triton.language as tl

NAME = "fill"
DESCRIPTION = ("out = torch.full_like(x, value[0]): x only gives the shape and dtype (its data is not read); "
               "value is a one-element tensor so that no host sync is needed.")
CATEGORY = "memory"
LEVEL = 1


@triton.jit
def fill_kernel(value_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(value_ptr)
    vals = tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty) + v.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, vals, mask=mask)


def launch(x, value):
    out = torch.empty_like(x)
    n = out.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    fill_kernel[grid](value, out, n, BLOCK=BLOCK)
    return out


def reference(x, value):
    return torch.full_like(x, value.item())


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    value = (torch.rand((1,), generator=g) * 8.0 + 1.0).to(device=device, dtype=dtype)
    return (x, value)


def min_bytes(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(1000,), (4097,), (65536,)]
BENCH_SHAPES = [(1 << 27,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 0.0, "rtol": 0.0},
    torch.float16: {"atol": 0.0, "rtol": 0.0},
}
