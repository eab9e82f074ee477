"""Written for the issue-37 tests: a gated projection written per (batch, head, position) into a (B, H, S, D)
output through the strides it is given, then returned as (B, S, H, D) with ``transpose(1, 2).contiguous()``:
the whole output copied once more after the launch."""

import torch
import triton
import triton.language as tl

NAME = "output_transpose_copy"


@triton.jit
def gate_kernel(x_ptr, g_ptr, out_ptr, H, S, D, sxb, sxs, sxh, so_b, so_h, so_s, so_d, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0)
    s = tl.program_id(1)
    b = bh // H
    h = bh % H
    d = tl.arange(0, BLOCK_D)
    x = tl.load(x_ptr + b * sxb + s * sxs + h * sxh + d, mask=d < D, other=0.0)
    g = tl.load(g_ptr + h * D + d, mask=d < D, other=0.0)
    tl.store(out_ptr + b * so_b + h * so_h + s * so_s + d * so_d, x * tl.sigmoid(g), mask=d < D)


def launch(x, g):
    B, S, H, D = x.shape
    out = torch.empty((B, H, S, D), device=x.device, dtype=x.dtype)
    gate_kernel[(B * H, S)](x, g, out, H, S, D, x.stride(0), x.stride(1), x.stride(2),
                            out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                            BLOCK_D=triton.next_power_of_2(D))
    return out.transpose(1, 2).contiguous()


def reference(x, g):
    return x * torch.sigmoid(g)[None, None]


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    B, S, H, D = shape
    return (torch.randn(shape, generator=gen).to(device=device, dtype=dtype),
            torch.randn((H, D), generator=gen).to(device=device, dtype=dtype))


CHECK_SHAPES = [(2, 9, 3, 20)]
BENCH_SHAPES = [(8, 2048, 16, 128)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
