"""Attack (GPU-only: bench detection): computes honestly for its first 40 calls (every
verification passes), then, once it is called many times on the same buffers (a bench), returns
a cached output for each input address: the timed calls do almost nothing.
Expected: verified, timed as very fast, then rejected by the hardware check: under ncu, in a
fresh process with fresh inputs per call, it computes, and the kernel time per call is far above
what the bench claimed (hardware_unconfirmed).
"""

import torch
import triton
import triton.language as tl

NAME = "g20_bench_detect_cache"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor (an attack on the bench)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


_calls = {"n": 0}
_cache = {}


def launch(x, y):
    _calls["n"] += 1
    key = (x.data_ptr(), y.data_ptr(), x.numel())
    if _calls["n"] > 40 and key in _cache:
        return _cache[key]
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 2.5, BLOCK=1024, num_warps=4)
    if _calls["n"] > 40:
        _cache[key] = out
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
