"""Elementwise polynomial over a huge block held by a single warp: ptxas runs out of registers."""

import torch
import triton
import triton.language as tl

NAME = "poly_spill"
DESCRIPTION = "out = sum_k c_k * x^k over 4096 elements per program with num_warps=1."


@triton.jit
def poly_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    a = x * y
    b = x + y
    c = x - y
    d = a * b + c
    out = tl.sum(d) + d * x + b * c + tl.max(a)
    tl.store(out_ptr + offs, out)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 4096
    assert n % BLOCK == 0
    poly_kernel[(n // BLOCK,)](x, y, out, n, BLOCK=BLOCK, num_warps=1)
    return out


def reference(x, y):
    a, b, c = x * y, x + y, x - y
    d = a * b + c
    d2 = d.view(-1, 4096)
    return (d2.sum(1, keepdim=True) + d2 * x.view(-1, 4096) + (b * c).view(-1, 4096)
            + a.view(-1, 4096).amax(1, keepdim=True)).view(-1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(4096,), (32768,)]
BENCH_SHAPES = [(4096 * 264,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-4}}
