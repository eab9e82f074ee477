"""Two kernels launched by one helper; both take their block from a module constant; the first one's grid is a
lambda reading META."""

import torch
import triton
import triton.language as tl

NAME = "launch_meta_constant"
BLOCK_SIZE = 512


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


@triton.jit
def shift_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def scale_shift(x):
    n = x.numel()
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731
    scale_kernel[grid](x, tmp, n, BLOCK=BLOCK_SIZE)
    shift_kernel[(triton.cdiv(n, BLOCK_SIZE),)](tmp, out, n, BLOCK=BLOCK_SIZE)
    return out


def launch(x):
    return scale_shift(x)


def reference(x):
    return x * 3.0 + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
