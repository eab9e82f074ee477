"""SwiGLU gate (silu(a) * b) over a flattened activation, compiled once for every token count (do_not_specialize)."""

import torch
import triton
import triton.language as tl

NAME = "silu_mul_unspecialized_numel"
DESCRIPTION = ("out = silu(a) * b for bf16 (tokens, hidden) activations, a flat 1-D kernel over n = tokens * hidden. "
               "The token count changes on every serving step, so n_elements is in do_not_specialize (one binary, "
               "no recompile stall when an odd count shows up). The price: the JIT no longer knows n is a multiple "
               "of 16, the bound mask offs < n has constancy 1 and every load/store is split into 2-byte accesses, "
               "although the model's shapes (hidden = 4096) always divide the block.")


@triton.jit(do_not_specialize=["n_elements"])
def silu_mul_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(a, b):
    out = torch.empty_like(a)
    n = a.numel()
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
    return out


def reference(a, b):
    return (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


def min_bytes(shape, dtype):
    T, H = shape
    return 3 * T * H * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(3, 300), (7, 1000), (16, 1024)]
BENCH_SHAPES = [(8192, 4096)]
DTYPES = [torch.bfloat16]
TOLERANCE = {torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2}}
