"""flat_tiles: a naive transpose (1-D programs over the flat index split by // and %) -> 2-D tiles on a 2-D grid,
on a kernel written for the test; triage's flat_index_2d names it, the candidates verify under the interpreter,
and the finding is gone from them (and the IR tier's uncoalesced_access from the cuda:90 IR). Kernels it cannot
take (a 3-D split, a second use of the program id, a loop) are left alone."""

from __future__ import annotations

import ast

from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.flat_tiles import tiles_source
from tritondx.tools.task.spec import load_task, parse_task_source

TASK = "flat_tiles"


def _flat(spec):
    return [f for f in triage(spec)[1] if f.detector == "flat_index_2d"]


def test_naive_transpose_gets_tiles(rw, tmp_path):
    (f,) = _flat(load_task(rw.task_path(TASK)))
    assert f.kernel == "transpose_kernel" and "flat_tiles" in f.suggests
    props = [p for p in propose(rw.context_from(TASK, []), limit=8) if p.family == "flat_tiles"]
    assert [(p.params["rows"], p.params["cols"]) for p in props] == [(64, 64), (32, 128)]
    for i, p in enumerate(props):
        assert f.id in p.motivated_by
        call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Subscript))
        assert len(call.func.slice.elts) == 2
        rw.verify(TASK, p.source, tmp_path, f"c{i}")
        assert _flat(parse_task_source(p.source, "c.py")) == []


def test_uncoalesced_store_gone_from_the_ir(rw, tmp_path):
    before = [f for f in rw.ir_findings(rw.task_path(TASK), tmp_path / "ir0") if f.detector == "uncoalesced_access"]
    assert before
    p = next(p for p in propose(rw.context_from(TASK, before), limit=8) if p.family == "flat_tiles")
    cand = tmp_path / "cand.py"
    cand.write_text(p.source)
    after = [f for f in rw.ir_findings(cand, tmp_path / "ir1") if f.detector == "uncoalesced_access"]
    assert after == []


def test_kernels_it_cannot_take_are_left_alone(rw):
    src = rw.task_path(TASK).read_text()
    three = src.replace("r = offs // N", "r = (offs // N) % M")
    assert tiles_source(three, "transpose_kernel", 64, 64) is None
    again = src.replace("tl.store(out_ptr + c * M + r, v, mask=mask)",
                        "tl.store(out_ptr + c * M + r, v + pid, mask=mask)")
    assert tiles_source(again, "transpose_kernel", 64, 64) is None
    two = src.replace("c = offs % N", "c = offs % M")
    assert tiles_source(two, "transpose_kernel", 64, 64) is None
