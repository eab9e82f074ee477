"""Showcase task of the causal_split family (bench/families/README.md). A causal attention forward whose key loop masks every tile (causal_split's motivating case)."""

import torch
import triton
import triton.language as tl

NAME = "causal_attn"
DESCRIPTION = "softmax(q k^T * scale + causal mask) v for one head, online softmax over key tiles."


@triton.jit
def causal_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, scale, D: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, (start_m + 1) * BLOCK_M, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < N, other=0.0)
        qk = tl.dot(q, k) * scale
        qk = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, float("-inf"))  # MASK
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
    causal_attn_kernel[(triton.cdiv(N, 32),)](q, k, v, o, N, D ** -0.5, D=D, BLOCK_M=32, BLOCK_N=16)
    return o


def reference(q, k, v):
    N, D = q.shape
    s = (q @ k.t()) * D ** -0.5
    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3))


CHECK_SHAPES = [(80, 16), (64, 32)]
BENCH_SHAPES = [(8192, 64)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-2, "rtol": 1e-2}}
