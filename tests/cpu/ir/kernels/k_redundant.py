"""Bias-add launched on a 2-D grid whose second axis is never used, plus a shared weight vector.

Every program along grid axis 1 repeats the same work, and every program reloads the whole weight
vector (its address depends on no program id).
"""

import torch
import triton
import triton.language as tl

NAME = "bias_redundant"
DESCRIPTION = "out[i, :] = x[i, :] * w + b, grid (M, 4) where axis 1 is unused."


@triton.jit
def bias_kernel(x_ptr, w_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask)  # LOAD-W
    x = tl.load(x_ptr + row * N + cols, mask=mask)
    tl.store(out_ptr + row * N + cols, x * w, mask=mask)


def launch(x, w):
    M, N = x.shape
    out = torch.empty_like(x)
    bias_kernel[(M, 4)](x, w, out, N, BLOCK=triton.next_power_of_2(N))
    return out


def reference(x, w):
    return x * w


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((M, N), generator=g).to(device=device, dtype=dtype),
            torch.randn((N,), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(7, 300), (16, 1000)]
BENCH_SHAPES = [(4096, 2048)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
