"""fp16 matmul that reads its operands through host-side tensor descriptors (TMA on sm_90)."""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

NAME = "matmul_tma"
DESCRIPTION = "C = A @ B, fp16, operands loaded with TensorDescriptor.load (cp.async.bulk.tensor)."


@triton.jit
def mm_tma_kernel(a_desc, b_desc, c_ptr, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):  # LOOP
        a = a_desc.load([pid_m * BM, k])  # TMA-A
        b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def launch(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    a_desc = TensorDescriptor.from_tensor(a, [128, 64])
    b_desc = TensorDescriptor.from_tensor(b, [64, 128])
    mm_tma_kernel[(M // 128, N // 128)](a_desc, b_desc, c, N, K, BM=128, BN=128, BK=64, num_warps=8)
    return c


def reference(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((M, K), generator=g).to(device=device, dtype=dtype),
            torch.randn((K, N), generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(128, 128, 64)]
BENCH_SHAPES = [(2048, 2048, 512)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 2e-2, "rtol": 2e-2}}
