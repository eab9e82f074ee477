"""Flat-bucket copy whose offset and size are in do_not_specialize (one by name, one by index)."""

import torch
import triton
import triton.language as tl

NAME = "unspecialized_bucket"
DESCRIPTION = "grads packed into one flat bucket at a running offset; offset and n unspecialized."


@triton.jit(do_not_specialize=["offset", 3, "scale"])
def bucket_kernel(src_ptr, dst_ptr, offset, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src_ptr + offs, mask=mask)
    tl.store(dst_ptr + offset + offs, v * scale, mask=mask)


def launch(a, b):
    out = torch.empty((a.numel() + b.numel(),), device=a.device, dtype=a.dtype)
    offset = 0
    for g in (a, b):
        bucket_kernel[(triton.cdiv(g.numel(), 512),)](g, out, offset, g.numel(), 0.5, BLOCK=512)
        offset += g.numel()
    return out


def reference(a, b):
    return torch.cat([a.flatten(), b.flatten()]) * 0.5


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(2))


# (3, 7): offset 21 is not a multiple of 16 (the unaligned binary); (4, 32): both aligned
CHECK_SHAPES = [(3, 7), (4, 32)]
BENCH_SHAPES = [(1024, 1024)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
