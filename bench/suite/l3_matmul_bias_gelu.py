"""Linear layer with bias and GELU: a tl.dot matmul kernel, then a separate bias + GELU kernel."""

import torch
import triton
import triton.language as tl

NAME = "matmul_bias_gelu"
DESCRIPTION = ("out = gelu(A @ B + bias) for A (M, K), B (K, N), bias (N,) in fp16 (exact erf GELU). "
               "Kernel 1 writes C = A @ B (64x64x32 tiles); kernel 2 reads C back and applies bias + GELU.")
CATEGORY = "matmul"
LEVEL = 3


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


@triton.jit
def bias_gelu_kernel(c_ptr, bias_ptr, out_ptr, n_elements, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    c = tl.load(c_ptr + offs, mask=mask).to(tl.float32)
    bias = tl.load(bias_ptr + offs % N, mask=mask).to(tl.float32)
    x = c + bias
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(a, b, bias):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](a, b, c, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    out = torch.empty_like(c)
    n = c.numel()
    bias_gelu_kernel[(triton.cdiv(n, 1024),)](c, bias, out, n, N, BLOCK=1024)
    return out


def reference(a, b, bias):
    return torch.nn.functional.gelu(a.float() @ b.float() + bias.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn((M, K), generator=g) / K ** 0.5).to(device=device, dtype=dtype)
    b = torch.randn((K, N), generator=g).to(device=device, dtype=dtype)
    bias = (0.5 * torch.randn((N,), generator=g)).to(device=device, dtype=dtype)
    return (a, b, bias)


def flops(shape, dtype):
    M, N, K = shape
    return 2 * M * N * K + 10 * M * N


def min_bytes(shape, dtype):
    M, N, K = shape
    return (M * K + K * N + N + M * N) * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(64, 48, 40), (100, 70, 33)]
BENCH_SHAPES = [(8192, 8192, 4096)]
DTYPES = [torch.float16]
TOLERANCE = {
    torch.float16: {"atol": 5e-3, "rtol": 1e-2},
}
