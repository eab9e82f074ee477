"""Matrix-vector product, one program per output row looping over K in blocks of 256."""

import torch
import triton
import triton.language as tl

NAME = "gemv"
DESCRIPTION = "y = A @ x for A (M, K) and x (K,), fp32 accumulation, y in the input dtype."
CATEGORY = "matmul"
LEVEL = 3


@triton.jit
def gemv_kernel(a_ptr, x_ptr, y_ptr, K, stride_am, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        mask = rk < K
        a = tl.load(a_ptr + row * stride_am + rk, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + rk, mask=mask, other=0.0).to(tl.float32)
        acc += a * x
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def launch(a, x):
    M, K = a.shape
    y = torch.empty((M,), device=a.device, dtype=a.dtype)
    gemv_kernel[(M,)](a, x, y, K, a.stride(0), BLOCK_K=256)
    return y


def reference(a, x):
    return (a.float() @ x.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    M, K = shape
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((M, K), generator=g).to(device=device, dtype=dtype)
    x = torch.randn((K,), generator=g).to(device=device, dtype=dtype)
    return (a, x)


def flops(shape, dtype):
    M, K = shape
    return 2 * M * K


CHECK_SHAPES = [(7, 300), (100, 1000), (33, 4097)]
BENCH_SHAPES = [(16384, 16384)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 5e-2, "rtol": 1e-2},
    torch.float32: {"atol": 1e-3, "rtol": 1e-4},
}
