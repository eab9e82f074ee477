"""Row softmax in one kernel, one program per row, three loops over the row (max, sum of exp, normalize)."""

import torch
import triton
import triton.language as tl

NAME = "softmax"
DESCRIPTION = ("softmax over the last dim of x (M, N), computed in fp32, output in x's dtype. "
               "The row length N varies (attention rows, hidden sizes, vocabularies).")
CATEGORY = "softmax"
LEVEL = 2
DYNAMIC = True


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    m_acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_acc = tl.maximum(m_acc, x)
    m = tl.max(m_acc, axis=0)
    s_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        s_acc += tl.exp(x - m)
    s = tl.sum(s_acc, axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_row + cols, (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty), mask=mask)


def launch(x):
    M, N = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK=1024)
    return out


def reference(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((M, N), generator=g) * 3.0).to(device=device, dtype=dtype)
    return (x,)


def flops(shape, dtype):
    M, N = shape
    return 4 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097), (5, 2048)]
BENCH_SHAPES = [(65536, 1024), (16384, 4096), (4096, 32000), (8192, 50257)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-4},
    torch.float16: {"atol": 1e-3, "rtol": 1e-2},
}
