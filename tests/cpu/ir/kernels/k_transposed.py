"""2-D copy of a transposed (column-major) matrix, with the row stride excluded from specialization.

``do_not_specialize`` keeps the JIT from turning ``stride_xm == 1`` into a constant, so the axis
analysis sees no unit-stride dimension: the coalescing pass keeps the default order (dim 1 fastest),
where consecutive lanes read addresses ``stride_xn`` elements apart.
"""

import torch
import triton
import triton.language as tl

NAME = "transposed_copy"
DESCRIPTION = "out = x.contiguous() for x = y.t(), with stride_xm in do_not_specialize."


@triton.jit(do_not_specialize=["stride_xm"])
def tcopy_kernel(x_ptr, out_ptr, N, stride_xm, stride_xn, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn)  # LOAD-T
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x)


def launch(x):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    tcopy_kernel[(M // 64, N // 64)](x, out, N, x.stride(0), x.stride(1), BM=64, BN=64)
    return out


def reference(x):
    return x.contiguous()


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((N, M), generator=g).to(device=device, dtype=dtype).t(),)


CHECK_SHAPES = [(64, 64), (128, 192)]
BENCH_SHAPES = [(2048, 2048)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
