"""A task that writes into a preallocated, zero-filled destination (a KV cache), as real code does.

``Out`` comes from make_inputs as zeros: the kernel scatters the rows of K to the slots DestLoc
names and the rest of the cache keeps what it held. The probe must accept the zero input (a
destination buffer), not call it degenerate. Shape: (tokens, heads, head_dim, slots).
"""

import torch
import triton
import triton.language as tl

NAME = "kv_scatter_small"
DESCRIPTION = "Out[DestLoc[i]] = K[i] into a zero-filled cache (tiny shapes for the verifier tests)."


@triton.jit
def scatter_kernel(k_ptr, dest_ptr, out_ptr, row_elems, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    slot = tl.load(dest_ptr + tok)
    for start in range(0, row_elems, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < row_elems
        v = tl.load(k_ptr + tok * row_elems + offs, mask=mask)
        tl.store(out_ptr + slot * row_elems + offs, v, mask=mask)


def launch(K, DestLoc, Out):
    Out = Out.clone()
    tokens = K.shape[0]
    row = K.shape[1] * K.shape[2]
    scatter_kernel[(tokens,)](K, DestLoc, Out, row, BLOCK=64)
    return Out


def reference(K, DestLoc, Out):
    out = Out.clone()
    out[DestLoc.long()] = K
    return out


def make_inputs(shape, dtype, seed, device):
    tokens, heads, head_dim, slots = shape
    g = torch.Generator().manual_seed(seed)
    K = torch.randn((tokens, heads, head_dim), generator=g).to(device=device, dtype=dtype)
    DestLoc = torch.randperm(slots, generator=g)[:tokens].to(torch.int32).to(device)
    Out = torch.zeros((slots, heads, head_dim), device=device, dtype=dtype)
    return (K, DestLoc, Out)


CHECK_SHAPES = [(7, 3, 40, 20)]
BENCH_SHAPES = [(16384, 8, 128, 65536)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
