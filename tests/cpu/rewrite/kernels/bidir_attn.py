"""Counter-example for causal_split: a padding mask on the key columns (not a row/column comparison)."""

import torch
import triton
import triton.language as tl

NAME = "bidir_attn"
DESCRIPTION = "softmax(q k^T * scale) v for one head, keys past N masked."


@triton.jit
def bidir_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, scale, D: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, N, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < N, other=0.0)
        qk = tl.where(cols[None, :] < N, tl.dot(q, k) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < N, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(o_ptr + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=offs_m[:, None] < N)


def launch(q, k, v):
    N, D = q.shape
    o = torch.empty_like(q)
    bidir_attn_kernel[(triton.cdiv(N, 32),)](q, k, v, o, N, D ** -0.5, D=D, BLOCK_M=32, BLOCK_N=16)
    return o


def reference(q, k, v):
    return torch.softmax((q @ k.t()) * q.shape[1] ** -0.5, -1) @ v


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3))


CHECK_SHAPES = [(80, 16)]
BENCH_SHAPES = [(8192, 64)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-2, "rtol": 1e-2}}
