"""Showcase task of the grid_per_item family (bench/families/README.md), written for the issue-37 tests:
rows scaled by their L2 norm on a persistent grid capped at 48 programs
(``min(M, 48)``: sized for some other device), the program count passed as an argument."""

import torch
import triton
import triton.language as tl

NAME = "rownorm_capped_programs"


@triton.jit
def rownorm_kernel(x_ptr, out_ptr, M, N, stride_x, stride_o, nprog, BLOCK: tl.constexpr):
    first = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in range(first, M, nprog):
        v = tl.load(x_ptr + r * stride_x + cols, mask=cols < N, other=0.0)
        inv = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) + 1e-6)
        tl.store(out_ptr + r * stride_o + cols, v * inv, mask=cols < N)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    progs = min(M, 48)
    rownorm_kernel[(progs,)](x, out, M, N, x.stride(0), out.stride(0), progs, BLOCK=triton.next_power_of_2(N))
    return out


def reference(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(100, 33), (7, 64)]
BENCH_SHAPES = [(65536, 128)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
