"""fp32 matmul with input_precision="ieee" although the task tolerates tf32 rounding.

The FMA dot reads its A operand from an unswizzled shared buffer with 8 lanes of a warp on 8 different
rows 128 bytes apart: an 8-way shared-memory bank conflict.
"""

import torch
import triton
import triton.language as tl

NAME = "matmul_f32_ieee"
DESCRIPTION = "C = A @ B in fp32 with tl.dot(..., input_precision='ieee'): FMA, not tensor cores."


@triton.jit
def mm_ieee_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])  # LOAD-A
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])  # LOAD-B
        acc = tl.dot(a, b, acc, input_precision="ieee")  # DOT
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)


def launch(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    mm_ieee_kernel[(M // 128, N // 16)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                       BM=128, BN=16, BK=32, num_warps=4)
    return c


def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((M, K), generator=g).to(device=device, dtype=dtype),
            torch.randn((K, N), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(128, 32, 64)]
BENCH_SHAPES = [(1024, 1024, 256)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-2, "rtol": 1e-2}}
