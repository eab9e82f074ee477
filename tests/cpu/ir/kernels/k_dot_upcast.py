"""fp16 matmul that upcasts both operands to fp32 before tl.dot."""

import torch
import triton
import triton.language as tl

NAME = "matmul_upcast"
DESCRIPTION = "C = A @ B with fp16 A, B converted to fp32 in the kernel before the dot (tf32 MMA)."


@triton.jit
def mm_upcast_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :]).to(tl.float32)  # UPCAST-A
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :]).to(tl.float32)  # UPCAST-B
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(tl.float16))


def launch(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    mm_upcast_kernel[(M // 64, N // 64)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                         BM=64, BN=64, BK=32, num_warps=4)
    return c


def reference(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((M, K), generator=g).to(device=device, dtype=dtype),
            torch.randn((K, N), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(64, 64, 32)]
BENCH_SHAPES = [(1024, 1024, 256)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 2e-2, "rtol": 2e-2}}
