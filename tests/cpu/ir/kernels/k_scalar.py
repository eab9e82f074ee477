"""One scalar per program: no block tensors, so no pass changes a layout or a loop."""

import torch
import triton
import triton.language as tl

NAME = "scalar_scale"
DESCRIPTION = "out[i] = 2 * x[i], one element per program (a deliberately degenerate kernel)."


@triton.jit
def scalar_kernel(x_ptr, out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, 2.0 * tl.load(x_ptr + pid))


def launch(x):
    out = torch.empty_like(x)
    scalar_kernel[(x.numel(),)](x, out)
    return out


def reference(x):
    return 2 * x


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(100,), (257,)]
BENCH_SHAPES = [(4096,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
