"""Written for the issue-37 tests: a row softmax on a fixed 32-program grid (a core count of another device),
each program striding over rows and walking every row twice (max, then exp/sum/store in a second pass over
a running sum). Shapes are sentinels mapped to the task's own sizes: no size can be derived from them."""

import torch
import triton
import triton.language as tl

NAME = "softmax_fixed_programs"
PROGRAMS = 32


@triton.jit
def softmax_strided_kernel(x_ptr, out_ptr, M, N, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for row in range(pid, M, tl.num_programs(0)):
        base = row * stride
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf"))
            m = tl.maximum(m, v)
        mx = tl.max(m, axis=0)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf"))
            s += tl.exp(v - mx)
        total = tl.sum(s, axis=0)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf"))
            tl.store(out_ptr + base + cols, tl.exp(v - mx) / total, mask=cols < N)


def softmax(x):
    M, N = x.shape
    out = torch.empty_like(x)
    softmax_strided_kernel[(PROGRAMS,)](x, out, M, N, x.stride(0), BLOCK=128)
    return out


def launch(x):
    return softmax(x)


def reference(x):
    return torch.softmax(x, dim=-1)


SIZES = {"small": (45, 700), "full": (8192, 4096)}


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(SIZES[shape[0]], generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [("small",)]
BENCH_SHAPES = [("full",)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-5}}
