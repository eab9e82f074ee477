"""GeGLU composed from two kernels: erf-GELU of the gate into a temporary, then multiply by up."""

import torch
import triton
import triton.language as tl

NAME = "geglu"
DESCRIPTION = ("out = gelu(gate) * up for gate, up (M, N) (exact erf GELU). "
               "Done as tmp = gelu(gate) (one kernel), then out = tmp * up (a second kernel).")
CATEGORY = "activation"
LEVEL = 2


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def mul_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a * b).to(out_ptr.dtype.element_ty), mask=mask)


def launch(gate, up):
    n = gate.numel()
    tmp = torch.empty_like(gate)
    out = torch.empty_like(gate)
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    gelu_kernel[grid](gate, tmp, n, BLOCK=BLOCK)
    mul_kernel[grid](tmp, up, out, n, BLOCK=BLOCK)
    return out


def reference(gate, up):
    # the intermediate gelu(gate) is rounded to the input dtype, as in a two-op eager implementation
    return (torch.nn.functional.gelu(gate.float()).to(gate.dtype).float() * up.float()).to(gate.dtype)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator().manual_seed(seed)
    gate = (torch.randn((M, N), generator=g) * 2.0).to(device=device, dtype=dtype)
    up = torch.randn((M, N), generator=g).to(device=device, dtype=dtype)
    return (gate, up)


def flops(shape, dtype):
    M, N = shape
    return 9 * M * N


CHECK_SHAPES = [(7, 300), (16, 1000), (3, 4097)]
BENCH_SHAPES = [(8192, 16384)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 5e-3, "rtol": 5e-3},
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
}
