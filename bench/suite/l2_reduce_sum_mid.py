"""Sum over the middle dim of a 3-D tensor: one program per (batch, 128 columns), one row per loop step."""

import torch
import triton
import triton.language as tl

NAME = "reduce_sum_mid"
DESCRIPTION = ("out = x.sum(1) for x (B, R, C) -> (B, C), fp32 accumulation, output in x's dtype. "
               "One program per (b, block of 128 columns) walking down the R rows one at a time.")
CATEGORY = "reduce"
LEVEL = 2


@triton.jit
def mid_sum_kernel(x_ptr, out_ptr, R, C, stride_b, stride_r, stride_ob, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = cols < C
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    for r in range(0, R):
        x = tl.load(x_ptr + b * stride_b + r * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        acc += x
    tl.store(out_ptr + b * stride_ob + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    B, R, C = x.shape
    out = torch.empty((B, C), device=x.device, dtype=x.dtype)
    BLOCK_C = 128
    grid = (B, triton.cdiv(C, BLOCK_C))
    mid_sum_kernel[grid](x, out, R, C, x.stride(0), x.stride(1), out.stride(0), BLOCK_C=BLOCK_C)
    return out


def reference(x):
    return x.float().sum(1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    B, R, C = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((B, R, C), generator=g) + 0.1).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    B, R, C = shape
    return B * R * C


CHECK_SHAPES = [(3, 37, 300), (2, 300, 65), (1, 5, 1000)]
BENCH_SHAPES = [(16, 4096, 4096)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-3, "rtol": 1e-4},
    torch.float16: {"atol": 5e-2, "rtol": 1e-2},
}
