"""Per-row int8 dequantization to fp16/bf16: flat elementwise kernel, the row's scale found by a division."""

import torch
import triton
import triton.language as tl

NAME = "dequantize_int8_per_row"
DESCRIPTION = "out[m, n] = q[m, n] * scale[m] for q (M, N) int8 and scale (M,) in fp16/bf16; output in scale's dtype."
CATEGORY = "quant"
LEVEL = 2


@triton.jit
def dequantize_kernel(q_ptr, scale_ptr, out_ptr, n_elements, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    row = offs // N
    q = tl.load(q_ptr + offs, mask=mask).to(tl.float32)
    s = tl.load(scale_ptr + row, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (q * s).to(out_ptr.dtype.element_ty), mask=mask)


def launch(q, scale):
    M, N = q.shape
    out = torch.empty((M, N), device=q.device, dtype=scale.dtype)
    n = q.numel()
    BLOCK = 1024
    dequantize_kernel[(triton.cdiv(n, BLOCK),)](q, scale, out, n, N, BLOCK=BLOCK)
    return out


def reference(q, scale):
    return (q.float() * scale.float()[:, None]).to(scale.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, (M, N), generator=g).to(device=device, dtype=torch.int8)
    scale = (torch.rand((M,), generator=g) * 0.05 + 1e-3).to(device=device, dtype=dtype)
    return (q, scale)


def min_bytes(shape, dtype):
    M, N = shape
    es = torch.empty((), dtype=dtype).element_size()
    return M * N + es * M + M * N * es


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(16384, 8192)]
DTYPES = [torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},
}
