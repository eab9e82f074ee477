"""Bias + SiLU over a (tokens, hidden) activation whose token count varies from call to call."""

import torch
import triton
import triton.language as tl

NAME = "bias_silu_varying_tokens"
DESCRIPTION = ("out = silu(x + b[None, :]) for x (T, H) fp16, T the number of tokens in the batch (512 to 65536 "
               "in use), H = 4096. Grid (T, H / BLOCK) with one hand-picked BLOCK=256 and default warps for every "
               "T: small batches are launch/latency-bound, large ones bandwidth-bound, and they want different "
               "blocks and warps.")
DYNAMIC = True


@triton.jit
def bias_silu_kernel(x_ptr, b_ptr, out_ptr, N, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    h = x + b
    y = h / (1.0 + tl.exp(-h))
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, b):
    M, N = x.shape
    out = torch.empty_like(x)
    BLOCK = 256
    bias_silu_kernel[(M, triton.cdiv(N, BLOCK))](x, b, out, N, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out


def reference(x, b):
    return torch.nn.functional.silu(x.float() + b.float()[None, :]).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((M, N), generator=g).to(device=device, dtype=dtype)
    b = torch.randn((N,), generator=g).to(device=device, dtype=dtype)
    return (x, b)


CHECK_SHAPES = [(3, 300), (16, 1000), (7, 4096)]
BENCH_SHAPES = [(512, 4096), (8192, 4096), (65536, 4096)]
DTYPES = [torch.float16]
TOLERANCE = {torch.float16: {"atol": 2e-3, "rtol": 2e-3}}
