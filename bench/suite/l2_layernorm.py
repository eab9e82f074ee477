"""LayerNorm over the last dim, one program per row, three loops over the row (mean, variance, normalize)."""

import torch
import triton
import triton.language as tl

NAME = "layernorm"
DESCRIPTION = ("out = layer_norm(x, (N,), weight, bias, eps=1e-5) for x (M, N), statistics in fp32. "
               "One program per row; the row is read three times: for the mean, the variance, and the output.")
CATEGORY = "norm"
LEVEL = 2

EPS = 1e-5


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    # pass 1: mean
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / N
    # pass 2: variance
    acc_var = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc_var += d * d
    var = tl.sum(acc_var, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    # pass 3: normalize, scale and shift
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, weight, bias):
    M, N = x.shape
    out = torch.empty_like(x)
    BLOCK = 1024
    layernorm_kernel[(M,)](x, weight, bias, out, N, x.stride(0), out.stride(0), EPS, BLOCK=BLOCK)
    return out


def reference(x, weight, bias):
    N = x.shape[-1]
    return torch.nn.functional.layer_norm(x.float(), (N,), weight.float(), bias.float(), EPS).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((M, N), generator=g) * 2.0 + 0.5).to(device=device, dtype=dtype)
    weight = (1.0 + 0.1 * torch.randn((N,), generator=g)).to(device=device, dtype=dtype)
    bias = (0.1 * torch.randn((N,), generator=g)).to(device=device, dtype=dtype)
    return (x, weight, bias)


def flops(shape, dtype):
    M, N = shape
    return 8 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 8192)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
}
