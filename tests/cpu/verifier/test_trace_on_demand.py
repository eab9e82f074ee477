"""The runner's line trace on demand: the judge asks for it only where the plan has a branch the trace
decides (or a flipped case); without the ask the runner sends no lines, and lines it sends unasked are
never read, so a candidate gains nothing from a trace it skips or forges."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritondx.tools.verify.judge import spawn
from tritondx.tools.verify.plan.cases import BranchCoverage, CasePlan, CheckCase
from tritondx.tools.verify.plan.branches import Branch
from tritondx.tools.verify.judge.coverage import trace_decides
from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.verify.judge.candidate import Judge

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"

#: an honest axpy whose kernel branch on the program id runs both sides on every listed size: only the
#: line trace can show that (the launcher's evaluation cannot tell which side a program takes)
BOTH_SIDES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if pid % 2 == 0:
        out = alpha * x + y
    else:
        out = y + alpha * x
    tl.store(out_ptr + offs, out, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, 2.5, BLOCK=128, num_warps=1)
    return out
'''


@pytest.fixture
def interpret(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)   # the judge hides its working folder from the runners


def _plain_axpy(tmp_path: Path) -> Path:
    p = tmp_path / "plain.py"
    src = AXPY.read_text()
    p.write_text(src[:src.index("def reference")])
    return p


def _judge(cand: Path) -> Judge:
    return Judge({"task": str(AXPY), "candidate": str(cand), "device": "cpu", "allowed_ops": []})


def _record_calls(monkeypatch, forge_lines: bool = False) -> list[tuple[bool, bool]]:
    """(kernels off, trace asked) of every call the judge makes; ``forge_lines``: every answer claims
    that every line of the candidate ran, asked or not (a runner that forges its trace)."""
    seen: list[tuple[bool, bool]] = []
    real = spawn.RunnerProcess.call

    def call(self, args, skip_mask=(), skip_rest=False, profile=False, inputs_back=True, trace=False, staged=None):
        seen.append((bool(skip_rest or skip_mask), trace))
        ans = real(self, args, skip_mask, skip_rest, profile, inputs_back, trace, staged)
        if forge_lines:
            ans.setdefault("diag", {})["lines"] = list(range(1, 200))
        return ans
    monkeypatch.setattr(spawn.RunnerProcess, "call", call)
    return seen


def test_a_runner_asked_for_no_trace_answers_no_lines(tmp_path, interpret):
    import torch
    cand = _plain_axpy(tmp_path)
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        x, y = torch.randn(300), torch.randn(300)
        plain = r.call([x, y])
        traced = r.call([x, y], trace=True)
        with pytest.raises(TypeError):
            r.call([x, y], trace="yes")
    finally:
        r.close()
    assert "lines" not in plain["diag"] and "positions" not in plain["diag"]
    assert plain["diag"]["launches"] == 1 and isinstance(plain["outs"][0], torch.Tensor)
    body = cand.read_text().splitlines().index("    x = tl.load(x_ptr + offs, mask=mask)") + 1
    assert body in traced["diag"]["lines"], traced["diag"].get("lines")


def test_a_plan_without_a_branch_the_trace_decides_asks_for_no_trace(tmp_path, interpret, monkeypatch):
    seen = _record_calls(monkeypatch)
    result = _judge(_plain_axpy(tmp_path)).run()
    assert result["passed"]
    assert seen and not any(trace for _, trace in seen), seen


def test_a_dynamic_branch_is_traced_on_every_plain_call_and_never_on_a_kernels_off_call(tmp_path, interpret,
                                                                                       monkeypatch):
    cand = tmp_path / "both.py"
    cand.write_text(BOTH_SIDES)
    seen = _record_calls(monkeypatch)
    result = _judge(cand).run()
    assert result["passed"], result
    assert any("pid % 2 == 0" in line and "sides seen in the line trace" in line for line in result["coverage"])
    plain = [trace for off, trace in seen if not off]
    assert plain and all(plain) and not any(trace for off, trace in seen if off), seen


def test_lines_sent_unasked_reach_no_side(tmp_path, interpret, monkeypatch):
    """With the trace not asked (forced here), a runner's forged lines are not read: the dynamic branch
    stays unreached and the candidate is rejected."""
    cand = tmp_path / "both.py"
    cand.write_text(BOTH_SIDES)
    _record_calls(monkeypatch, forge_lines=True)
    monkeypatch.setattr(Judge, "_wants_trace", lambda self, case: False)
    with pytest.raises(Rejected) as err:
        _judge(cand).run()
    assert err.value.klass == "unchecked_branch" and "line trace never ran" in err.value.reason


def _bc(status: str, in_kernel: bool) -> BranchCoverage:
    b = Branch(key="f:2:4", func="f", line=2, test="n > 3", in_kernel=in_kernel, needs=[True, False],
               why="new test", true_line=3, false_line=5)
    return BranchCoverage(branch=b, status=status)


def test_wants_trace_follows_the_branches_the_trace_decides(tmp_path):
    case = CheckCase(shape=(8,), dtype="float32", seed=1, why="listed in CHECK_SHAPES")
    j = Judge.__new__(Judge)
    j.device = "cpu"
    j.plan = CasePlan(cases=[case], branches=[_bc("covered", True), _bc("dead", False)])
    assert not j._wants_trace(case)
    assert j._wants_trace(case.model_copy(update={"flipped": True}))
    j.plan.branches.append(_bc("dynamic", True))
    assert j._wants_trace(case)
    j.device = "cuda:0"   # no kernel line trace on a GPU: a kernel branch is not the trace's to decide
    assert not j._wants_trace(case) and not trace_decides(j.plan.branches[-1], kernel_lines_traced=False)
    j.plan.branches.append(_bc("dynamic", False))
    assert j._wants_trace(case)
    j.plan = None
    assert not j._wants_trace(case)


def test_the_judge_holds_the_device_per_case_and_stages_outside_the_holds(tmp_path, interpret, monkeypatch):
    """``Judge._held``: each case's calls run under a device hold of their own (a timer of another job waits for
    one case's device work at most, never a whole group's), a case's inputs are staged with no hold, and the
    verdict carries the judge's seconds per step (``judge.candidate.STEPS``)."""
    from tritondx.tools.exec import gpulock

    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    seen: list[tuple[str, int | None]] = []
    holds: list = []
    real_call, real_stage = spawn.RunnerProcess.call, spawn.RunnerProcess.stage_case

    def hold_id():
        h = gpulock.current_hold()
        if h is None:
            return None
        if h not in holds:
            holds.append(h)
        return holds.index(h)

    def call(self, *a, **kw):
        seen.append(("call", hold_id()))
        return real_call(self, *a, **kw)

    def stage(self, args):
        seen.append(("stage", hold_id()))
        return real_stage(self, args)
    monkeypatch.setattr(spawn.RunnerProcess, "call", call)
    monkeypatch.setattr(spawn.RunnerProcess, "stage_case", stage)
    j = _judge(_plain_axpy(tmp_path))
    result = j.run()
    assert result["passed"], result
    cases = len(result["checks"])
    assert cases >= 2 and [k for k, _ in seen].count("stage") == cases, seen
    assert all(h is None for k, h in seen if k == "stage"), f"a case was staged under a hold: {seen}"
    per_case = [h for k, h in seen if k == "call"]
    assert None not in per_case and len(per_case) == 2 * cases
    # the two calls of a case share one hold; no two cases do
    assert len(set(per_case)) == cases and all(per_case[2 * i] == per_case[2 * i + 1] for i in range(cases)), seen
    steps = j.step_seconds()
    assert set(steps) >= {"runner", "lock_wait", "held", "inputs", "stage", "calls", "compare"}, steps
    assert steps["held"] >= steps["calls"] > 0.0
