"""Clean loop kernel: 40 programs, each loops over its rows with unmasked 1024-wide tiles (N is a
multiple of BLOCK). Counter-example for the loop detectors (masks, branches, multibuffer)."""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, M, N: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for row in range(pid, M, 40):
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * N + cols)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), dtype=torch.float32, device=x.device)
    row_sum_kernel[(40,)](x, out, M, N=N, BLOCK=1024)
    return out


def reference(x):
    return x.float().sum(dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(7, 2048)]
BENCH_SHAPES = [(80, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-3, "rtol": 1e-4}}
