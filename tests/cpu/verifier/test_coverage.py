"""The runner's line trace (tools/verify/judge/coverage.py) and what the judge takes from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tritondx.tools.verify.plan.branches import Branch
from tritondx.tools.verify.plan.cases import BranchCoverage
from tritondx.tools.verify.judge.coverage import LineTracer, trace_verdict

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


DEVICE_SRC = ("def sms(t):\n    if t.is_cuda:\n        return 132\n    return 4\n\n"
              "def unused(t):\n    if t.device.type != 'cuda':\n        return 4\n    return 132\n")


def _device_branches(device: str) -> dict[str, BranchCoverage]:
    from tritondx.tools.verify.plan.branches import added_branches
    from tritondx.tools.verify.plan.cases import device_sides
    out = {}
    for b in added_branches("", DEVICE_SRC):
        bc = BranchCoverage(branch=b, status="dynamic")
        device_sides(bc, device)
        out[b.func] = bc
    return out


def test_device_kind_branch_needs_only_the_side_of_the_device():
    cpu, gpu = _device_branches("cpu"), _device_branches("cuda:0")
    assert cpu["sms"].branch.cuda_side is True and cpu["unused"].branch.cuda_side is False
    # `if t.is_cuda: return ...` then `return 4`: the false side is the line after the if
    assert cpu["sms"].branch.false_line == 4 and cpu["sms"].branch.true_line == 3
    assert cpu["sms"].branch.needs == [False] and cpu["unused"].branch.needs == [True]
    assert gpu["sms"].branch.needs == [True] and gpu["unused"].branch.needs == [False]
    assert "runs only on a CUDA device" in cpu["sms"].note and "runs only on a non-CUDA device" in gpu["sms"].note


def test_device_kind_branch_side_must_run(tmp_path):
    """On the CPU only the non-CUDA side is needed, and the trace must show it ran (a helper never called
    fails); a test that is not a device kind still needs both sides."""
    p = tmp_path / "dev.py"
    p.write_text(DEVICE_SRC)
    spec = importlib.util.spec_from_file_location("dev_mod", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch
    with LineTracer(str(p)) as t:
        mod.sms(torch.empty(1))
    bcs = _device_branches("cpu")
    problems = trace_verdict(list(bcs.values()), t.lines, kernel_lines_traced=True)
    assert bcs["sms"].status == "dynamic" and bcs["sms"].reached == {"false": "line trace"}
    assert bcs["unused"].status == "unreached" and len(problems) == 1 and "unused" in problems[0]
    with LineTracer(str(p)) as t:   # the same code on a CUDA verifier: the CUDA side never ran
        mod.sms(torch.empty(1))
    gpu = _device_branches("cuda:0")
    trace_verdict([gpu["sms"]], t.lines, kernel_lines_traced=False)
    assert gpu["sms"].status == "unreached"


TERNARY = "def f(n):\n    a = 1 if n > 3 else 2\n    return a\n"


def test_ternary_sides_are_told_apart_by_the_positions_that_ran(tmp_path):
    """One line holds both sides of a conditional expression: the runner's trace also records the positions
    of the instructions run on such lines, and a side none of whose instructions ran is unreached."""
    from tritondx.tools.verify.plan.branches import added_branches
    from tritondx.tools.verify.runner.runner import _ifexp_lines, _line_trace
    p = tmp_path / "tern.py"
    p.write_text(TERNARY)
    spec = importlib.util.spec_from_file_location("tern_mod", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (b,) = added_branches("", TERNARY)
    assert b.arms == [[2, 8, 2, 9], [2, 24, 2, 25]]

    def verdict(*ns):
        lines, spots = set(), set()
        with _line_trace(str(p), lines, spots, _ifexp_lines(TERNARY)):
            for n in ns:
                mod.f(n)
        bc = BranchCoverage(branch=b.model_copy(deep=True), status="dynamic")
        return bc, trace_verdict([bc], lines, kernel_lines_traced=True, spots=spots)

    bc, problems = verdict(1)
    assert bc.status == "unreached" and "never ran its true side" in problems[0]
    bc, problems = verdict(9, 1)
    assert problems == [] and bc.reached == {"true": "line trace", "false": "line trace"}
    # without positions only the line shows (the old rule): it ran
    assert trace_verdict([BranchCoverage(branch=b, status="dynamic")], {2}, kernel_lines_traced=True) == []
