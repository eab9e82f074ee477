"""grid_per_item: a grid-stride kernel on a program count sized for another device (a literal 32, a grid capped
with min(M, 48) and the count passed as an argument) -> one program per item; verified under the interpreter,
triage's fixed_program_count gone from the candidate; kernels whose iterations share state are left alone."""

from __future__ import annotations

import ast

import pytest
from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.grid_per_item import per_item_source
from tritondx.tools.task.spec import load_task, parse_task_source


def _fixed(spec):
    return [f for f in triage(spec)[1] if f.detector == "fixed_program_count"]


@pytest.mark.parametrize("task,kernel,launcher,grid", [
    ("softmax_fixed_programs", "softmax_strided_kernel", "softmax", "(M,)"),
    ("grid_per_item", "rownorm_kernel", "launch", "(M,)"),
    ("grid_to_cores", "relu_tiles_kernel", "_relu", "(triton.cdiv(n, 256),)"),
])
def test_one_program_per_item(rw, tmp_path, task, kernel, launcher, grid):
    (f,) = _fixed(load_task(rw.task_path(task)))
    assert "grid_per_item" in f.suggests
    props = [p for p in propose(rw.context_from(task, []), limit=8) if p.family == "grid_per_item"]
    assert len(props) == 1
    p = props[0]
    assert f.id in p.motivated_by
    fn = rw.function(p.source, kernel)
    assert not [n for n in ast.walk(fn) if isinstance(n, ast.For) and "program" in ast.unparse(n.iter)]
    call = next(n for n in ast.walk(rw.function(p.source, launcher)) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert ast.unparse(call.func.slice) == grid
    rw.verify(task, p.source, tmp_path, "c")
    assert _fixed(parse_task_source(p.source, "cand.py")) == []   # the finding is gone from the candidate


CARRIED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(pid, M, tl.num_programs(0)):
        acc += tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + pid * N + cols, acc, mask=cols < N)


def launch(x):
    M, N = x.shape
    out = torch.zeros((32, N), device=x.device, dtype=x.dtype)
    k[(32,)](x, out, M, N, BLOCK=triton.next_power_of_2(N))
    return out.sum(0)
'''


def test_state_carried_between_items_is_left_alone():
    assert per_item_source(CARRIED) is None                  # an accumulator across rows, stored after the loop
    no_tail = CARRIED.replace("    tl.store(out_ptr + pid * N + cols, acc, mask=cols < N)\n", "")
    assert per_item_source(no_tail) is None                  # state initialized before the loop
    pointer = CARRIED.replace("    acc = tl.zeros([BLOCK], tl.float32)\n", "").replace(
        "acc += tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0)",
        "x_ptr += N\n        tl.store(out_ptr + r * N + cols, tl.load(x_ptr + cols), mask=cols < N)").replace(
        "    tl.store(out_ptr + pid * N + cols, acc, mask=cols < N)\n", "")
    assert per_item_source(pointer) is None                  # a parameter advanced by each iteration


def test_program_count_used_in_the_body_is_left_alone():
    src = CARRIED.replace("    acc = tl.zeros([BLOCK], tl.float32)\n", "").replace(
        "acc += tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0)",
        "tl.store(out_ptr + r * N + cols, tl.load(x_ptr + r * N + cols) * tl.num_programs(0))").replace(
        "    tl.store(out_ptr + pid * N + cols, acc, mask=cols < N)\n", "")
    assert per_item_source(src) is None


def test_program_id_read_in_the_body_is_left_alone():
    per_program = CARRIED.replace("    acc = tl.zeros([BLOCK], tl.float32)\n", "").replace(
        "acc += tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0)",
        "tl.atomic_add(out_ptr + pid * N + cols, tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0))").replace(
        "    tl.store(out_ptr + pid * N + cols, acc, mask=cols < N)\n", "")
    assert per_item_source(per_program) is None               # partials kept per program slot


def test_capped_grid_also_sized_to_the_device(rw, tmp_path):
    """The alternative on the same finding: grid_to_cores reads the SM count at launch for a min(M, 48) grid too
    (the count argument follows the grid)."""
    props = [p for p in propose(rw.context_from("grid_per_item", []), limit=8) if p.family == "grid_to_cores"]
    assert [p.params["per_sm"] for p in props] == [1, 4]
    assert "rownorm_kernel[(_tdx_sm_count(x) * 4,)](x, out, M, N, x.stride(0), out.stride(0), _tdx_sm_count(x) * 4," \
        in props[1].source
    rw.verify("grid_per_item", props[1].source, tmp_path, "c4")
