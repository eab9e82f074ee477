"""Written for the issue-37 tests: a two-pass RMSNorm (sum of squares, then normalize) whose shapes are
sentinels mapped to the task's own sizes, so no size can be derived: a template's size branch has one side the
checked sizes never reach."""

import torch
import triton
import triton.language as tl

NAME = "rmsnorm_sentinel"
EPS = 1e-6


@triton.jit
def rms_two_pass_kernel(x_ptr, w_ptr, out_ptr, N, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        tl.store(out_ptr + row * stride_out + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, weight):
    M, N = x.shape
    out = torch.empty_like(x)
    rms_two_pass_kernel[(M,)](x, weight, out, N, x.stride(0), out.stride(0), EPS, BLOCK=256)
    return out


def reference(x, weight):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return (xf * rstd * weight.float()).to(x.dtype)


SIZES = {"small": (37, 700), "full": (8192, 4096)}


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    M, N = SIZES[shape[0]]
    return (torch.randn((M, N), generator=g).to(device=device, dtype=dtype),
            (torch.rand((N,), generator=g) + 0.5).to(device=device, dtype=dtype))


CHECK_SHAPES = [("small",)]
BENCH_SHAPES = [("full",)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
