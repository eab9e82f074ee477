"""Tile centering with row and column means and a transposed store: layouts must be converted."""

import torch
import triton
import triton.language as tl

NAME = "center_transpose"
DESCRIPTION = "out = (x - rowmean - colmean).T over 64x64 tiles; the tile means are stored too (outputs[0] checked)."


@triton.jit
def center_t_kernel(x_ptr, out_ptr, rmean_ptr, cmean_ptr, M, N, B: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * B + tl.arange(0, B)
    rn = pid_n * B + tl.arange(0, B)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    r = tl.sum(x, axis=1) / B
    c = tl.sum(x, axis=0) / B
    tl.store(rmean_ptr + pid_n * M + rm, r)  # STORE-R
    tl.store(cmean_ptr + pid_m * N + rn, c)
    y = x - r[:, None] - c[None, :]
    tl.store(out_ptr + rn[:, None] * M + rm[None, :], tl.trans(y))  # STORE-T


def launch(x):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    rmean = torch.empty((N // 64, M), dtype=x.dtype, device=x.device)
    cmean = torch.empty((M // 64, N), dtype=x.dtype, device=x.device)
    center_t_kernel[(M // 64, N // 64)](x, out, rmean, cmean, M, N, B=64)
    return out


def reference(x):
    t = x.unflatten(0, (-1, 64)).unflatten(2, (-1, 64))
    y = t - t.mean(3, keepdim=True) - t.mean(1, keepdim=True)
    return y.flatten(2).flatten(0, 1).t().contiguous()


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(64, 64), (128, 192)]
BENCH_SHAPES = [(2048, 2048)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
