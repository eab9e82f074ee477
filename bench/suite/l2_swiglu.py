"""SwiGLU on a fused gate/up projection output: 2-D grid of (row, column block) programs."""

import torch
import triton
import triton.language as tl

NAME = "swiglu"
DESCRIPTION = ("x (M, 2N) holds [gate | up] per row; out (M, N) = silu(gate) * up, in fp32. "
               "The token count M varies.")
CATEGORY = "activation"
LEVEL = 2
DYNAMIC = True


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + N + cols, mask=mask).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    M, N2 = x.shape
    N = N2 // 2
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK = 1024
    grid = (M, triton.cdiv(N, BLOCK))
    swiglu_kernel[grid](x, out, N, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out


def reference(x):
    gate, up = x.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((M, 2 * N), generator=g) * 2.0).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return 5 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(4000, 11008), (8192, 11008), (16384, 14336)]
DTYPES = [torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float16: {"atol": 5e-3, "rtol": 5e-3},
    torch.bfloat16: {"atol": 3e-2, "rtol": 2e-2},
}
