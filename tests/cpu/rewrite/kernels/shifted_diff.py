"""Forward difference out[i] = x[i + 1] - x[i]: offsets start one past a block multiple (no alignment hint)."""

import torch
import triton
import triton.language as tl

NAME = "shifted_diff"


@triton.jit
def diff_kernel(x_ptr, out_ptr, n_out, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nxt = pid * BLOCK + 1 + tl.arange(0, BLOCK)
    mask = nxt <= n_out
    a = tl.load(x_ptr + nxt, mask=mask)
    b = tl.load(x_ptr + nxt - 1, mask=mask)
    tl.store(out_ptr + nxt - 1, a - b, mask=mask)


def launch(x):
    n_out = x.numel() - 1
    out = torch.empty((n_out,), device=x.device, dtype=x.dtype)
    BLOCK = 1024
    diff_kernel[(triton.cdiv(n_out, BLOCK),)](x, out, n_out, BLOCK=BLOCK)
    return out


def reference(x):
    return x[1:] - x[:-1]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
