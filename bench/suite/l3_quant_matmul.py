"""Weight-only int8 matmul (W8A16): a kernel dequantizes the whole weight to fp16, then a tl.dot matmul."""

import torch
import triton
import triton.language as tl

NAME = "quant_matmul_w8a16"
DESCRIPTION = ("out = A @ (Wq * scale[None, :]) for A (M, K) fp16, Wq (K, N) int8 and per-output-channel "
               "scale (N,) fp16. Kernel 1 writes the dequantized fp16 weight (K, N); kernel 2 is a 64x64x32 "
               "tl.dot matmul on it.")
CATEGORY = "matmul"
LEVEL = 3


@triton.jit
def dequant_kernel(wq_ptr, scale_ptr, w_ptr, n_elements, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    q = tl.load(wq_ptr + offs, mask=mask).to(tl.float32)
    s = tl.load(scale_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(w_ptr + offs, (q * s).to(w_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
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


def launch(a, wq, scale):
    M, K = a.shape
    _, N = wq.shape
    w = torch.empty((K, N), device=a.device, dtype=a.dtype)
    n = wq.numel()
    dequant_kernel[(triton.cdiv(n, 1024),)](wq, scale, w, n, N, BLOCK=1024)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](a, w, c, M, N, K,
                        a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def reference(a, wq, scale):
    return (a.float() @ (wq.float() * scale.float()[None, :])).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((M, K), generator=g).to(device=device, dtype=dtype)
    wq = torch.randint(-127, 128, (K, N), generator=g).to(device=device, dtype=torch.int8)
    scale = ((torch.rand((N,), generator=g) * 0.5 + 0.5) / (64.0 * K ** 0.5)).to(device=device, dtype=dtype)
    return (a, wq, scale)


def flops(shape, dtype):
    M, N, K = shape
    return 2 * M * N * K


def min_bytes(shape, dtype):
    M, N, K = shape
    es = torch.empty((), dtype=dtype).element_size()
    return (M * K + M * N + N) * es + K * N


CHECK_SHAPES = [(64, 48, 40), (100, 70, 33)]
BENCH_SHAPES = [(2048, 8192, 8192)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
