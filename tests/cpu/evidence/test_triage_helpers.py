"""Triage reads the launches of launch() and of the helpers it calls (real launchers wrap their kernels), each
launch's literal values in the function that makes it; a helper launch() never calls is not read."""

from __future__ import annotations

from tritondx.tools.evidence.triage import triage
from tritondx.tools.task.spec import load_task

TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def _scale_then_add(x):
    n = x.numel()
    BLOCK = 64
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(n, BLOCK),)](x, tmp, n, BLOCK=BLOCK, num_warps=1)
    add_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out


def _unused(x):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, out, x.numel(), BLOCK=32, num_warps=1)
    return out


def launch(x):
    return _scale_then_add(x)


def reference(x):
    return x * 2.0 + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''


def test_launches_in_a_helper_are_read_there(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(TASK)
    _, found = triage(load_task(path))
    by = {}
    for f in found:
        by.setdefault(f.detector, []).append(f)
    (multi,) = by["multiple_launches"]
    assert multi.metric["launches"] == 2 and "functions it calls" in multi.message    # not _unused's third
    (tiny,) = by["tiny_block"]          # BLOCK = 64, a local of the helper; _unused's BLOCK=32 is not read
    assert tiny.kernel == "scale_kernel" and tiny.metric["BLOCK"] == 64
    (few,) = by["few_warps"]
    assert few.kernel == "scale_kernel" and few.metric["num_warps"] == 1
