"""One tl.dot tile of 32x32x32 fp16 per program: every dim a multiple of 16."""

import torch
import triton
import triton.language as tl


@triton.jit
def small_dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + pid * BM * BK + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], c)


BM, BN, BK = 32, 32, 32


def launch(a, b):
    P = a.shape[0] // BM
    c = torch.empty((a.shape[0], BN), dtype=torch.float32, device=a.device)
    small_dot_kernel[(P,)](a, b, c, BM=BM, BN=BN, BK=BK)
    return c


def reference(a, b):
    return a.float() @ b.float()


def make_inputs(shape, dtype, seed, device):
    (P,) = shape
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((P * BM, BK), generator=g).to(device=device, dtype=dtype)
    b = torch.randn((BK, BN), generator=g).to(device=device, dtype=dtype)
    return (a, b)


CHECK_SHAPES = [(3,)]
BENCH_SHAPES = [(20,)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}}
