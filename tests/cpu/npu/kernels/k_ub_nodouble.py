"""A loop over 16384-element tiles of an fp32 and an fp16 input: 160 KB per iteration fits the UB
once, but not twice, so the loads cannot be double-buffered."""

import torch
import triton
import triton.language as tl


@triton.jit
def fma_loop_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for start in range(0, N, BLOCK):
        offs = pid * N + start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
        tl.store(out_ptr + offs, x * y.to(tl.float32) + 1.0)


def launch(x, y):
    P, N = x.shape
    out = torch.empty_like(x)
    fma_loop_kernel[(P,)](x, y, out, N=N, BLOCK=16384)
    return out


def reference(x, y):
    return x * y.float() + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=torch.float16)
    return (x, y)


CHECK_SHAPES = [(2, 32768)]
BENCH_SHAPES = [(40, 65536)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-3}}
