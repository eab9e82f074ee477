"""Showcase task of the autotune_widen family (bench/families/README.md). An autotuned kernel whose config list holds one config twice (autotune_widen's motivating case)."""

import torch
import triton
import triton.language as tl

NAME = "autotune_one"
DESCRIPTION = "out = x * scale + bias per row, autotuned over one (repeated) config."


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@triton.jit
def scale_bias_kernel(x_ptr, out_ptr, n, scale, bias, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale + bias, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_bias_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, out, n, 1.5, -0.25)
    return out


def reference(x):
    return x * 1.5 - 0.25


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (3000,), (513,), (70,), (4097,), (12,), (999,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
