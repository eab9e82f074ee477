"""No device-kind test at all: a conditional expression on the tensor's device index, right only on the CPU.
The evaluator cannot tell its value (a dynamic branch) and its line runs on every call: only the positions of
the instructions that ran show that its GPU side never did."""

import torch
import triton
import triton.language as tl

NAME = "axpy_tiny_block_small"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor; BLOCK=128 (tiny check shapes for the verifier tests)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 128
    grid = (triton.cdiv(n, BLOCK),)
    alpha = 2.5 if x.device.index is None else 0.0
    axpy_kernel[grid](x, y, out, n, alpha, BLOCK=BLOCK, num_warps=1)
    return out


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


def flops(shape, dtype):
    return 2 * shape[0]


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
