"""Showcase task of the rows_per_program family (bench/families/README.md), written for the issue-37 tests:
a layer norm per (token, head) over a 32-element head (128 bytes), one program
per token and head: a grid of tiny programs with a reduction in each."""

import torch
import triton
import triton.language as tl

NAME = "tiny_rows_headnorm"


@triton.jit
def head_norm_kernel(x_ptr, w_ptr, out_ptr, H, D, eps, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    cols = tl.arange(0, BLOCK_D)
    ok = cols < D
    base = (t * H + h) * D
    x = tl.load(x_ptr + base + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    d = tl.where(ok, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / D
    w = tl.load(w_ptr + h * D + cols, mask=ok, other=0.0)
    y = d / tl.sqrt(var + eps) * w
    tl.store(out_ptr + base + cols, y.to(out_ptr.dtype.element_ty), mask=ok)


def launch(x, w):
    T, H, D = x.shape
    out = torch.empty_like(x)
    head_norm_kernel[(T, H)](x, w, out, H, D, 1e-5, BLOCK_D=triton.next_power_of_2(D))
    return out


def reference(x, w):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(-1, keepdim=True)
    return ((xf - mean) / torch.sqrt(var + 1e-5) * w.float()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    w = torch.rand(shape[1:], generator=g).to(device=device, dtype=dtype) + 0.5
    return (x, w)


CHECK_SHAPES = [(67, 3, 32), (5, 2, 20)]
BENCH_SHAPES = [(1 << 16, 8, 32)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
