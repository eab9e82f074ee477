"""Showcase task of the absmax_norm family (bench/families/README.md). Per-tensor int8 quantization whose launcher
takes the scale as x.abs().max() (a temporary of absolute values written and read back) before the kernel."""

import torch
import triton
import triton.language as tl

NAME = "quantize_absmax"
DESCRIPTION = "q = round(x * 127 / max|x|) as int8, with max|x|, per tensor."


@triton.jit
def quant_kernel(x_ptr, absmax_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    q = x * (127.0 / tl.load(absmax_ptr))
    q = tl.where(q >= 0, q + 0.5, q - 0.5)
    tl.store(out_ptr + offs, q.to(tl.int8), mask=mask)


def quantize(x):
    absmax = x.abs().max()
    out = torch.empty(x.shape, device=x.device, dtype=torch.int8)
    n = x.numel()
    quant_kernel[(triton.cdiv(n, 1024),)](x, absmax, out, n, BLOCK=1024)
    return out, absmax


def launch(x):
    return quantize(x)


def reference(x):
    absmax = x.abs().max()
    q = x * (127.0 / absmax)
    return torch.where(q >= 0, q + 0.5, q - 0.5).to(torch.int8), absmax


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,), (3,)]
BENCH_SHAPES = [(1 << 25,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
