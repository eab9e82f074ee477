"""Counter-example for vectorize_scalar_loop: a running sum stored every step (a loop-carried dependence)."""

import torch
import triton
import triton.language as tl

NAME = "scalar_prefix_sum"


@triton.jit
def prefix_kernel(x_ptr, out_ptr, N, stride):
    row = tl.program_id(0)
    acc = 0.0
    for i in range(N):
        acc += tl.load(x_ptr + row * stride + i).to(tl.float32)
        tl.store(out_ptr + row * stride + i, acc)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    prefix_kernel[(M,)](x, out, N, x.stride(0))
    return out


def reference(x):
    return torch.cumsum(x, dim=-1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(3, 37)]
BENCH_SHAPES = [(4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
