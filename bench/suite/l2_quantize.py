"""Dynamic per-row symmetric int8 quantization: one program per row, an absmax loop, then a quantize loop."""

import torch
import triton
import triton.language as tl

NAME = "quantize_int8_per_row"
DESCRIPTION = ("scale[m] = max(|x[m, :]|, 1e-6) / 127; q = clamp(floor(x / scale + 0.5), -127, 127) as int8. "
               "Returns (q (M, N) int8, scale (M,) fp32). The tolerance admits off-by-one in q at rounding ties, "
               "which also bounds the scale: a wrong scale moves the largest q by more than one.")
CATEGORY = "quant"
LEVEL = 2


@triton.jit
def quantize_kernel(x_ptr, q_ptr, scale_ptr, N, stride_x, stride_q, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    amax_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
        amax_acc = tl.maximum(amax_acc, tl.abs(x))
    amax = tl.maximum(tl.max(amax_acc, axis=0), 1e-6)
    scale = amax / 127.0
    tl.store(scale_ptr + row, scale)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        q = tl.floor(x / scale + 0.5)
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
        tl.store(q_ptr + row * stride_q + cols, q.to(tl.int8), mask=mask)


def launch(x):
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.int8)
    scale = torch.empty((M,), device=x.device, dtype=torch.float32)
    quantize_kernel[(M,)](x, q, scale, N, x.stride(0), q.stride(0), BLOCK=1024)
    return q, scale


def reference(x):
    xf = x.float()
    scale = xf.abs().amax(dim=-1).clamp_min(1e-6) / 127.0
    q = torch.floor(xf / scale[:, None] + 0.5).clamp(-127, 127).to(torch.int8)
    return q, scale


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    row_scale = torch.rand((M, 1), generator=g) * 4.0 + 0.1
    x = (torch.randn((M, N), generator=g) * row_scale).to(device=device, dtype=dtype)
    return (x,)


def min_bytes(shape, dtype):
    M, N = shape
    return M * N * torch.empty((), dtype=dtype).element_size() + M * N + 4 * M


def flops(shape, dtype):
    M, N = shape
    return 4 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 8192)]
DTYPES = [torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float16: {"atol": 1.0, "rtol": 0.0},
    torch.bfloat16: {"atol": 1.0, "rtol": 0.0},
}
