"""An sgemm whose 32x32x32 tiles are the launcher's signature defaults (launch -> triton_impl -> sgemm)."""

import torch
import triton
import triton.language as tl

NAME = "launch_sgemm_defaults"


@triton.jit
def sgemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def sgemm(a, b, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    sgemm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                       c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def triton_impl(a, b):
    return sgemm(a, b)


def launch(a, b):
    return triton_impl(a, b)


def reference(a, b):
    return (a.float() @ b.float()).to(torch.float16)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    M, K, N = shape
    a = torch.randn((M, K), generator=g).to(device=device, dtype=dtype)
    b = (torch.randn((K, N), generator=g) / K ** 0.5).to(device=device, dtype=dtype)
    return (a, b)


CHECK_SHAPES = [(70, 90, 130)]
BENCH_SHAPES = [(4096, 4096, 4096)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
