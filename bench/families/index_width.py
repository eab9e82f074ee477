"""Per-channel scale of an NCHW activation with 64-bit flat offsets and a 64-bit div/mod per element."""

import torch
import triton
import triton.language as tl

NAME = "channel_scale_int64_index"
DESCRIPTION = ("out = x * s[None, :, None, None] on an NCHW fp32 tensor, flat 1-D kernel, at the 7x7 stage of a "
               "ResNet-50 (C = 2048, H*W = 49). Written defensively with pid.to(tl.int64) so offsets can never "
               "overflow, which makes the per-element channel lookup (offs // HW) % C a 64-bit division and modulo "
               "(a runtime 32-bit bypass plus a call to the emulation routine, tens of instructions each) for "
               "tensors far below 2^31 elements. H*W = 49 is not a multiple of 16, so the compiler cannot share one "
               "division among a thread's contiguous elements: every element pays for it.")


@triton.jit
def channel_scale_kernel(x_ptr, s_ptr, out_ptr, n_elements, C, HW, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    c = (offs // HW) % C
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + c, mask=mask)
    tl.store(out_ptr + offs, x * s, mask=mask)


def launch(x, s):
    _, C, H, W = x.shape
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    channel_scale_kernel[(triton.cdiv(n, BLOCK),)](x, s, out, n, C, H * W, BLOCK=BLOCK)
    return out


def reference(x, s):
    return x * s[None, :, None, None]


def make_inputs(shape, dtype, seed, device):
    C = shape[1]
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn((C,), generator=g).to(device=device, dtype=dtype))


def min_bytes(shape, dtype):
    n = shape[0] * shape[1] * shape[2] * shape[3]
    return (2 * n + shape[1]) * torch.empty((), dtype=dtype).element_size()


CHECK_SHAPES = [(2, 3, 5, 7), (1, 4, 9, 11), (2, 16, 8, 8), (2, 64, 7, 7)]
BENCH_SHAPES = [(256, 2048, 7, 7)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
