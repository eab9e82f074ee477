"""Showcase task of the strided_args family (bench/families/README.md). The launcher makes a transposed copy (permute(...).contiguous()) before a kernel that indexes with the
strides it is given (strided_args' motivating case)."""

import torch
import triton
import triton.language as tl

NAME = "permute_copy"
DESCRIPTION = "out[b, j, i] = x[b, i, j] * 3 through a permuted contiguous copy of x."


@triton.jit
def scale3_kernel(y_ptr, out_ptr, R, C, s_b, s_r, s_c, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    r = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    mask = cols < C
    v = tl.load(y_ptr + b * s_b + r * s_r + cols * s_c, mask=mask)
    tl.store(out_ptr + (b * R + r) * C + cols, 3.0 * v, mask=mask)


def _scaled_t(x):
    y = x.permute(0, 2, 1).contiguous()  # COPY
    B, R, C = y.shape
    out = torch.empty((B, R, C), device=x.device, dtype=x.dtype)
    scale3_kernel[(B, R)](y, out, R, C, y.stride(0), y.stride(1), y.stride(2), BLOCK=triton.next_power_of_2(C))
    return out


def launch(x):
    return _scaled_t(x)


def reference(x):
    return 3 * x.permute(0, 2, 1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(2, 30, 50), (3, 7, 64)]
BENCH_SHAPES = [(16, 1024, 1024)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
