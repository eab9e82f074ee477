"""Showcase task of the clone_fold family (bench/families/README.md). SGD with momentum over fp32 weights, updated in
place by its kernel; launch copies the weights and the momentum first so that the task leaves its inputs unchanged:
the copies read and write both tensors once more than the update itself (five passes become three)."""

import torch
import triton
import triton.language as tl

NAME = "sgd_momentum_inplace"
DESCRIPTION = "m = mu * m + g; w = w - lr * m, in place on copies of w and m."

LR, MU = 0.01, 0.9


@triton.jit
def sgd_momentum_kernel(w_ptr, g_ptr, m_ptr, n, lr, mu, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    w = tl.load(w_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    m = mu * m + g
    w = w - lr * m
    tl.store(w_ptr + offs, w, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)


def sgd_step(w, g, m, lr, mu):
    n = w.numel()
    sgd_momentum_kernel[(triton.cdiv(n, 1024),)](w, g, m, n, lr, mu, BLOCK=1024)
    return w, m


def launch(w, g, m):
    w = w.clone()
    m = m.clone()
    return sgd_step(w, g, m, LR, MU)


def reference(w, g, m):
    m2 = MU * m + g
    return w - LR * m2, m2


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(3))


CHECK_SHAPES = [(1000,), (4097,), (3,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
