"""Written for the issue-37 tests: an fp32 matmul whose products are a broadcast multiply and tl.sum over a 3-D
register tile, with a tolerance loose enough for tf32 (which the rewrite must still not use: fp32 products)."""

import torch
import triton
import triton.language as tl

NAME = "mulsum_matmul_fp32"


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    mm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, BM=16, BN=16, BK=16)
    return c


def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    M, N, K = shape
    return (torch.randn((M, K), generator=g).to(device=device, dtype=dtype),
            torch.randn((K, N), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(40, 24, 33)]
BENCH_SHAPES = [(4096, 4096, 4096)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-2, "rtol": 1e-2}}
