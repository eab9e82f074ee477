"""Alternating add/subtract chosen by an `if` inside the loop around tile work."""

import torch
import triton
import triton.language as tl


@triton.jit
def alt_sum_kernel(x_ptr, out_ptr, N: tl.constexpr, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, K):
        x = tl.load(x_ptr + k * N + offs)
        if k % 2 == 0:
            acc += x
        else:
            acc -= x * 0.5
    tl.store(out_ptr + offs, acc)


def launch(x):
    K, N = x.shape
    out = torch.empty((N,), dtype=torch.float32, device=x.device)
    BLOCK = 1024
    alt_sum_kernel[(N // BLOCK,)](x, out, N=N, K=K, BLOCK=BLOCK)
    return out


def reference(x):
    sign = torch.tensor([1.0 if k % 2 == 0 else -0.5 for k in range(x.shape[0])], dtype=x.dtype)
    return (x * sign[:, None].to(x.device)).sum(dim=0)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(6, 2048)]
BENCH_SHAPES = [(8, 40 * 1024)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
