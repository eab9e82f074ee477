"""Triage's multi_pass_loops on loops in the two arms of one ``if`` (issue 18 point 11)."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.task.spec import parse_task_source
from tritondx.tools.evidence.triage import triage

HERE = Path(__file__).parent
ROWSUM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, N, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    if EVEN:
        for start in range(0, N, BLOCK):
            acc += tl.load(x_ptr + row * N + start + tl.arange(0, BLOCK))
    else:
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    SECOND
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def launch(x):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=x.dtype)
    k[(M,)](x, out, N, BLOCK=2048, EVEN=N % 2048 == 0)
    return out


def reference(x):
    return x.sum(-1)


def make_inputs(shape, dtype, seed, device):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(7, 300)]
BENCH_SHAPES = [(8192, 8192)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
'''


def _multi_pass(src: str):
    _, findings = triage(parse_task_source(src, "rowsum.py"))
    return [f for f in findings if f.detector == "multi_pass_loops"]


def test_even_and_masked_loops_are_one_pass():
    assert _multi_pass(ROWSUM.replace("    SECOND\n", "")) == []


def test_a_second_loop_after_the_if_is_a_second_pass():
    second = ("    for start in range(0, N, BLOCK):\n"
              "        cols = start + tl.arange(0, BLOCK)\n"
              "        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)\n")
    (f,) = _multi_pass(ROWSUM.replace("    SECOND\n", second))
    assert f.metric["passes"] == 2
