"""Row scaling with a column loop whose loads and stores are masked on every iteration."""

import torch
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for row in range(pid, M, tl.num_programs(0)):
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < N
            x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
            tl.store(out_ptr + row * N + cols, x * 0.5, mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    row_scale_kernel[(40,)](x, out, M, N, BLOCK=1024)
    return out


def reference(x):
    return x * 0.5


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(7, 1000)]
BENCH_SHAPES = [(80, 3000)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
