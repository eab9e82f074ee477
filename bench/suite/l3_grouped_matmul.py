"""Grouped GEMM (MoE experts): rows of x split into G groups of different sizes, each times its own weight.
The launcher reads the group sizes on the host and launches one tl.dot matmul per group."""

import torch
import triton
import triton.language as tl

NAME = "grouped_matmul"
DESCRIPTION = ("x (sum(M_g), K) is split row-wise into G groups of sizes group_sizes (int32, G); "
               "out[rows of g] = x[rows of g] @ w[g] for w (G, K, N), fp16, fp32 accumulation. "
               "One kernel launch per group (64x64x32 tiles); the group sizes vary.")
CATEGORY = "matmul"
LEVEL = 3
DYNAMIC = True


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


def launch(x, w, group_sizes):
    total_m, K = x.shape
    G, _, N = w.shape
    out = torch.empty((total_m, N), device=x.device, dtype=x.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    start = 0
    for g, m in enumerate(group_sizes.tolist()):
        if m == 0:
            continue
        a = x[start:start + m]
        b = w[g]
        c = out[start:start + m]
        grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        matmul_kernel[grid](a, b, c, m, N, K,
                            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        start += m
    return out


def reference(x, w, group_sizes):
    outs = []
    start = 0
    for g, m in enumerate(group_sizes.tolist()):
        outs.append(x[start:start + m].float() @ w[g].float())
        start += m
    return torch.cat(outs, dim=0).to(x.dtype)


def _group_sizes(G, m_avg):
    # deterministic, uneven sizes between about 0.5 and 1.5 times m_avg, mostly not multiples of 64
    return [max(1, m_avg + ((g * 5) % 9 - 4) * m_avg // 8 + (g % 3) * 7) for g in range(G)]


def make_inputs(shape, dtype, seed, device):
    G, m_avg, N, K = shape
    sizes = _group_sizes(G, m_avg)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((sum(sizes), K), generator=g).to(device=device, dtype=dtype)
    w = (torch.randn((G, K, N), generator=g) / K ** 0.5).to(device=device, dtype=dtype)
    group_sizes = torch.tensor(sizes, dtype=torch.int32).to(device=device)
    return (x, w, group_sizes)


def flops(shape, dtype):
    G, m_avg, N, K = shape
    return 2 * sum(_group_sizes(G, m_avg)) * N * K


CHECK_SHAPES = [(3, 40, 48, 33), (4, 20, 70, 64), (2, 100, 32, 16)]
BENCH_SHAPES = [(8, 2048, 4096, 4096), (16, 700, 4096, 2048), (64, 128, 2048, 1024)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
