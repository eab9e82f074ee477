"""foreach add over a list of 8 tensor pairs of different sizes: one kernel launch per pair."""

import torch
import triton
import triton.language as tl

NAME = "foreach_add"
DESCRIPTION = ("outs[i] = a[i] + b[i] for 8 pairs of 1-D tensors of very different sizes "
               "(torch._foreach_add, as in an optimizer step). Inputs are (a0..a7, b0..b7), outputs a tuple of 8. "
               "The launcher issues one add kernel per pair.")
CATEGORY = "foreach"
LEVEL = 2

NUM_TENSORS = 8


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


def launch(*tensors):
    k = len(tensors) // 2
    a_list, b_list = tensors[:k], tensors[k:]
    outs = []
    BLOCK = 1024
    for a, b in zip(a_list, b_list):
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
        outs.append(out)
    return tuple(outs)


def reference(*tensors):
    k = len(tensors) // 2
    return tuple((a.float() + b.float()).to(a.dtype) for a, b in zip(tensors[:k], tensors[k:]))


def _sizes(base):
    # a mix of large and small tensors, most not multiples of the block size
    return [base, base // 4 + 3, 2 * base + 1, base // 64 + 5, 3 * base, base // 16 + 7, base // 2 + 11, 17]


def make_inputs(shape, dtype, seed, device):
    (base,) = shape
    g = torch.Generator().manual_seed(seed)
    sizes = _sizes(base)
    a = [torch.randn((s,), generator=g).to(device=device, dtype=dtype) for s in sizes]
    b = [torch.randn((s,), generator=g).to(device=device, dtype=dtype) for s in sizes]
    return tuple(a + b)


def flops(shape, dtype):
    return sum(_sizes(shape[0]))


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 22,)]
DTYPES = [torch.float32, torch.float16]
TOLERANCE = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-6},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
}
