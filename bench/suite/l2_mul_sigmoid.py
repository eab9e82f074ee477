"""MulSigmoid: x * sigmoid(y) elementwise (a gating op), one program per 1024 elements."""

import torch
import triton
import triton.language as tl

NAME = "mul_sigmoid"
DESCRIPTION = "out = x * sigmoid(y) for x, y of the same shape, in fp32."
CATEGORY = "activation"
LEVEL = 2


@triton.jit
def mul_sigmoid_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    out = x * (1.0 / (1.0 + tl.exp(-y)))
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    mul_sigmoid_kernel[grid](x, y, out, n, BLOCK=BLOCK)
    return out


def reference(x, y):
    return (x.float() * torch.sigmoid(y.float())).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = (torch.randn(shape, generator=g) * 3.0).to(device=device, dtype=dtype)
    return (x, y)


def flops(shape, dtype):
    M, N = shape
    return 5 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
}
