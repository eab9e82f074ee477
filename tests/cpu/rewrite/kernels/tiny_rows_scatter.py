"""Written for the issue-37 tests: one program per token copies its 16-element row (64 bytes) to the row a
loaded index names, scaled: a grid of tiny programs."""

import torch
import triton
import triton.language as tl

NAME = "tiny_rows_scatter"


@triton.jit
def scatter_rows_kernel(x_ptr, idx_ptr, out_ptr, scale, D, stride_x, stride_o, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0)
    dest = tl.load(idx_ptr + tok)
    cols = tl.arange(0, BLOCK_D)
    v = tl.load(x_ptr + tok * stride_x + cols, mask=cols < D, other=0.0)
    tl.store(out_ptr + dest * stride_o + cols, v * scale, mask=cols < D)


def launch(x, idx):
    T, D = x.shape
    out = torch.zeros((T, D), device=x.device, dtype=x.dtype)
    scatter_rows_kernel[(T,)](x, idx, out, 0.5, D, x.stride(0), out.stride(0), BLOCK_D=triton.next_power_of_2(D))
    return out


def reference(x, idx):
    out = torch.zeros_like(x)
    out[idx] = x * 0.5
    return out


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    idx = torch.randperm(shape[0], generator=g).to(device=device, dtype=torch.int32)
    return (x, idx)


CHECK_SHAPES = [(300, 16), (77, 12)]
BENCH_SHAPES = [(1 << 19, 16)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
