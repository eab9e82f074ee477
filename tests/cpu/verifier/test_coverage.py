"""The runner's line trace (tools/verify/coverage.py) and what the judge takes from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tritondx.tools.verify.branches import Branch
from tritondx.tools.verify.cases import BranchCoverage
from tritondx.tools.verify.coverage import LineTracer, trace_verdict

SRC = "def f(n):\n    if n > 3:\n        return 1\n    else:\n        return 2\n"


def _load(tmp_path: Path):
    p = tmp_path / "traced.py"
    p.write_text(SRC)
    spec = importlib.util.spec_from_file_location("traced_mod", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return str(p), mod


def _dynamic() -> BranchCoverage:
    b = Branch(key="f:2:4", func="f", line=2, test="n > 3", in_kernel=False, needs=[True, False], why="new test",
               true_line=3, false_line=5)
    return BranchCoverage(branch=b, status="dynamic")


def test_trace_records_only_the_file_lines_that_ran(tmp_path):
    path, mod = _load(tmp_path)
    with LineTracer(path) as t:
        mod.f(1)
    assert 5 in t.lines and 3 not in t.lines


def test_unrun_side_of_a_dynamic_branch_is_unreached(tmp_path):
    path, mod = _load(tmp_path)
    with LineTracer(path) as t:
        mod.f(1)
    bc = _dynamic()
    (problem,) = trace_verdict([bc], t.lines, kernel_lines_traced=True)
    assert bc.status == "unreached" and "true side" in problem
    with LineTracer(path) as t:
        mod.f(1)
        mod.f(9)
    bc = _dynamic()
    assert trace_verdict([bc], t.lines, kernel_lines_traced=True) == []
    assert bc.reached == {"true": "line trace", "false": "line trace"}
