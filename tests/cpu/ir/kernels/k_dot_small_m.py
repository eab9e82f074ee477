"""fp16 matmul with a 16-row tile: too few rows for a Hopper warpgroup MMA (needs 64)."""

import torch
import triton
import triton.language as tl

NAME = "matmul_small_m"
DESCRIPTION = "C = A @ B, fp16, BM=16 tiles and num_warps=2: lowers to mma.sync (MMA v2)."


@triton.jit
def mm_small_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])
        acc = tl.dot(a, b, acc)  # DOT
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(tl.float16))


def launch(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    mm_small_kernel[(M // 16, N // 64)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                        BM=16, BN=64, BK=32, num_warps=2)
    return c


def reference(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((M, K), generator=g).to(device=device, dtype=dtype),
            torch.randn((K, N), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(32, 64, 32)]
BENCH_SHAPES = [(1024, 1024, 256)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 2e-2, "rtol": 2e-2}}
