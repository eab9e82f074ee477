"""FastGelu (sigmoid approximation x * sigmoid(1.702 x)), one program per 256 elements."""

import torch
import triton
import triton.language as tl

NAME = "fast_gelu"
DESCRIPTION = "out = x * sigmoid(1.702 * x), the sigmoid approximation of GELU, computed in fp32."
CATEGORY = "activation"
LEVEL = 2


@triton.jit
def fast_gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x / (1.0 + tl.exp(-1.702 * x))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 256
    grid = (triton.cdiv(n, BLOCK),)
    fast_gelu_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def reference(x):
    xf = x.float()
    return (xf * torch.sigmoid(1.702 * xf)).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3.0).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return 5 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 4096)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
