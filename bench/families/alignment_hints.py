"""Gradient bucketing: each parameter's gradient scaled by 1/world_size and copied into one flat bf16 bucket."""

import torch
import triton
import triton.language as tl

NAME = "grad_bucket_copy_unspecialized"
DESCRIPTION = ("Before an all-reduce, the gradients of a transformer block's linear layers (qkv, o, up, down of "
               "hidden H) are averaged (x 1/8 ranks) and packed into one flat bf16 bucket: one launch per "
               "parameter at a running element offset. offset and n differ for every parameter, so the author put "
               "them in do_not_specialize (one binary). The JIT then cannot assume either is a multiple of 16: the "
               "store address bucket + offset + offs has unknown alignment and the bound mask offs < n constancy 1, "
               "so every access is 2 bytes wide, although with H a multiple of 16 every offset and size is.")


@triton.jit(do_not_specialize=["offset", "n"])
def bucket_copy_kernel(grad_ptr, bucket_ptr, offset, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(grad_ptr + offs, mask=mask).to(tl.float32)
    tl.store(bucket_ptr + offset + offs, (g * scale).to(bucket_ptr.dtype.element_ty), mask=mask)


def launch(qkv, o, up, down):
    grads = (qkv, o, up, down)
    total = sum(g.numel() for g in grads)
    bucket = torch.empty((total,), device=qkv.device, dtype=qkv.dtype)
    BLOCK = 1024
    offset = 0
    for g in grads:
        n = g.numel()
        bucket_copy_kernel[(triton.cdiv(n, BLOCK),)](g, bucket, offset, n, 0.125, BLOCK=BLOCK)
        offset += n
    return bucket


def reference(qkv, o, up, down):
    return torch.cat([g.flatten().float() * 0.125 for g in (qkv, o, up, down)]).to(qkv.dtype)


def make_inputs(shape, dtype, seed, device):
    (H,) = shape
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=g).to(device=device, dtype=dtype)
                 for s in ((3 * H, H), (H, H), (4 * H, H), (H, 4 * H)))


def min_bytes(shape, dtype):
    (H,) = shape
    return 2 * 12 * H * H * torch.empty((), dtype=dtype).element_size()


# H = 37: offsets 4107, 5476, ... are not multiples of 16 (the unaligned path must stay correct)
CHECK_SHAPES = [(37,), (64,), (100,)]
BENCH_SHAPES = [(4096,)]
DTYPES = [torch.bfloat16]
TOLERANCE = {torch.bfloat16: {"atol": 0.0, "rtol": 0.0}}
