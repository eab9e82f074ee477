"""Batched matrix product with tl.dot, 32x32x32 tiles, batch on the second grid axis."""

import torch
import triton
import triton.language as tl

NAME = "batched_matmul"
DESCRIPTION = "C[b] = A[b] @ B[b] for A (B, M, K) and B (B, K, N) in fp16, fp32 accumulation (torch.bmm)."
CATEGORY = "matmul"
LEVEL = 3


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
               stride_cb, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    a_ptr += batch * stride_ab
    b_ptr += batch * stride_bb
    c_ptr += batch * stride_cb
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(a, b):
    B, M, K = a.shape
    _, _, N = b.shape
    c = torch.empty((B, M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), B)
    bmm_kernel[grid](a, b, c, M, N, K,
                     a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
                     c.stride(0), c.stride(1), c.stride(2),
                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def reference(a, b):
    return torch.bmm(a.float(), b.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    B, M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((B, M, K), generator=g).to(device=device, dtype=dtype)
    b = torch.randn((B, K, N), generator=g).to(device=device, dtype=dtype)
    return (a, b)


def flops(shape, dtype):
    B, M, N, K = shape
    return 2 * B * M * N * K


def min_bytes(shape, dtype):
    B, M, N, K = shape
    return B * (M * K + K * N + M * N) * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(2, 64, 48, 40), (3, 50, 70, 33)]
BENCH_SHAPES = [(64, 1024, 1024, 1024)]
DTYPES = [torch.float16]
TOLERANCE = {
    torch.float16: {"atol": 2e-2, "rtol": 1e-2},
}
