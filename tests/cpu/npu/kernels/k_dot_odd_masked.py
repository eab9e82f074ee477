"""Masked matmul with 24x40x24 fp16 tl.dot tiles: M and K are not multiples of 16 (the cube fractal);
every load and store is masked, so the blocks may be rounded to multiples of 16."""

import torch
import triton
import triton.language as tl


@triton.jit
def odd_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    BLOCK_M = 24
    BLOCK_N = 40
    BLOCK_K = 24
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    odd_matmul_kernel[grid](a, b, c, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def reference(a, b):
    return a.float() @ b.float()


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((M, K), generator=g).to(device=device, dtype=dtype)
    b = torch.randn((K, N), generator=g).to(device=device, dtype=dtype)
    return (a, b)


CHECK_SHAPES = [(50, 70, 60)]
BENCH_SHAPES = [(192, 160, 96)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
