"""Counter-example for tile_2d: a per-row normalization (a reduction over the block) cannot be tiled over rows
by broadcasting: the reduction would mix rows. Its strided access (a column stride) is deliberate."""

import torch
import triton
import triton.language as tl

NAME = "row_colnorm"
DESCRIPTION = "out[:, j] = x[:, j] / sum(x[:, j]) for a column read with a row stride."


@triton.jit
def col_norm_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr):
    col = tl.program_id(0)
    rows = tl.arange(0, BLOCK_M)
    mask = rows < M
    v = tl.load(x_ptr + rows * N + col, mask=mask, other=0.0)
    s = tl.sum(v, axis=0)
    tl.store(out_ptr + rows * N + col, v / s, mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    col_norm_kernel[(N,)](x, out, M, N, BLOCK_M=triton.next_power_of_2(M))
    return out


def reference(x):
    return x / x.sum(0, keepdim=True)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g).to(device=device, dtype=dtype) + 0.5,)


CHECK_SHAPES = [(70, 20)]
BENCH_SHAPES = [(4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
