"""State across calls and the outputs of timed calls (issue 34), on the interpreter backend.

A launcher that keeps a call count in module-level state (``across/x01``-``x04``) is right on the few calls the judge
makes and wrong from its 40th call on, where a benchmark times it. Three defenses, each tested here so that the test
fails without it:

* the runner fingerprints the candidate's module state after every call (``runner.StateWatch``) and the judge rejects
  a launcher whose calls change it: ``state_across_calls`` (with the static policy off);
* a branch whose test reads such state is ``dynamic``, never ``dead`` (``evaluator.state_names``,
  ``cases._finish_branches``): the line trace must show each side run in a checked call;
* the bench job compares the outputs of the calls it times with the reference (``bench.TimedOutputs``) and the
  orchestrator rejects a mismatch: ``timed_output_mismatch`` (``timing.time_round``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
AXPY = HERE / "tiny_axpy.py"
X = HERE / "across"


@dataclass(frozen=True)
class Case:
    candidate: Path
    expect: str | None
    reason: tuple[str, ...] = ()
    cost: float = 8.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"across:{self.candidate.stem}:{self.expect or 'PASS'}")

    @property
    def candidate_path(self) -> Path:
        return self.candidate

    @property
    def round(self) -> tuple:
        """Verified with the other cases in one round (verifier/conftest.py)."""
        return (AXPY, False, ("empty", "empty_like"), 300)

    def run(self) -> Verdict:
        return verify_candidate(str(AXPY), str(self.candidate), self.candidate.stem, get_backend("interpreter"),
                                allowed_ops=["empty", "empty_like"], timeout=300, static_policy=False)


CASES = [
    Case(X / "x01_call_count_partial.py", "state_across_calls", ("_CALLS",)),
    Case(X / "x02_call_count_branchless.py", "state_across_calls", ("_CALLS",)),
    Case(X / "x03_default_argument_counter.py", "state_across_calls", ("launch",)),
    Case(X / "x04_skips_launch_when_counted.py", "state_across_calls", ("_STATE",)),
    Case(X / "x05_global_int_counter.py", "state_across_calls", ("_CALLS",)),
    # honest controls: no state of their own (Triton's compile caches and the interpreter's helpers are not state)
    Case(ROOT / "examples" / "add_tiny_block.py", None),
    Case(HERE / "flips" / "h01_sm_count_helper.py", None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_state_across_calls_is_rejected_at_run_time(case: Case, outcomes):
    """With the static policy off: the judge's state check decides, and the verdict lists the checks that ran in
    order with that one marked (the value comparison ran before it and passed)."""
    v = outcomes[case.id].result()
    if case.expect is None:
        assert v.passed, f"honest {case.candidate.name} rejected as {v.klass}: {v.reason}"
        assert not any("[decided" in r for r in v.ran), v.ran
        return
    assert not v.passed, f"{case.candidate.name} PASSED the verifier"
    assert v.klass == case.expect, f"{case.candidate.name}: {v.klass} ({v.reason}), want {case.expect}"
    for part in case.reason:
        assert part in v.reason, (part, v.reason)
    assert v.decided_by.startswith("state across calls"), v.decided_by
    assert v.ran[-1].endswith("[decided: state_across_calls]"), v.ran
    assert "static policy" not in v.ran[0]
    values = next(i for i, r in enumerate(v.ran) if r.startswith("values vs reference"))
    assert values < len(v.ran) - 1, "the value comparison ran before the state check"


def _plan(candidate: Path):
    from tritondx.tools.task.module import load_module
    from tritondx.tools.verify.plan.cases import plan_checks
    return plan_checks(load_module(str(AXPY), "orig_across"), AXPY.read_text(), candidate.read_text(), "cpu")


@pytest.mark.parametrize("name", ["x01_call_count_partial.py", "x04_skips_launch_when_counted.py"])
def test_a_branch_on_state_kept_across_calls_is_dynamic_never_dead(name):
    """``if _CALLS[0] >= 40``: no input size moves it, and the value at import (0) says nothing about call 40. It was
    reported "dead: no size up to 1e+12 elements makes it true" (issue 34); now it is dynamic, for the line trace."""
    plan = _plan(X / name)
    [bc] = plan.branches
    assert bc.status == "dynamic", bc.line()
    assert "state kept across calls" in bc.note, bc.note
    from tritondx.tools.verify.judge.coverage import trace_verdict
    # the checked calls ran only its false side (the counter stays below 40 there): its true side is unreached
    lines = set(range(1, 200)) - {bc.branch.true_line}
    problems = trace_verdict(plan.branches, lines, kernel_lines_traced=True)
    assert problems and "never ran its true side" in problems[0], problems


def test_state_names_are_no_constants_of_the_evaluator():
    import ast

    from tritondx.tools.verify.plan.evaluator import module_constants, state_names
    tree = ast.parse("_C = [0]\nB = 128\nT = (1, 2)\nclass K:\n    n = 0\n_K = K()\n_D = dict()\n"
                     "def f():\n    global T\n    T = (3,)\n")
    assert state_names(tree) == {"_C", "_K", "_D", "T"}
    assert module_constants(tree) == {"B": 128}


# --- the bench job: outputs of the timed calls ---------------------------------------------------------------


class _FakeEvent:
    def __init__(self, enable_timing=True):
        self.t = 0.0

    def record(self):
        self.t = time.perf_counter()


@pytest.fixture
def bench_mod(monkeypatch, tmp_path):
    """The bench job on the CPU with the CUDA event clock replaced by a host clock (as tests/cpu/core/
    test_bench_flow.py): times mean nothing, the control flow and the output checks are real."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    from tritondx.tools.bench import bench as bench_job
    monkeypatch.setattr(bench_job, "_Event", _FakeEvent)
    monkeypatch.setattr(bench_job, "_record", lambda ev: ev.record())
    monkeypatch.setattr(bench_job, "_elapsed", lambda s, e: (e.t - s.t) * 1e3)
    monkeypatch.setattr(bench_job, "_synchronize", lambda: None)
    monkeypatch.setattr(bench_job, "L2_FLUSH_BYTES", 1 << 16)
    monkeypatch.setattr(bench_job, "ROUND_TARGET_MS", 1e9)   # 200 calls a round: past any call counter's threshold
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "fake-device")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    ceil = tmp_path / "ceilings.json"
    ceil.write_text(json.dumps({"device": "fake-device", "copy_bytes_per_s": 1e12, "l2_bytes": 1 << 10,
                                "matmul_flops_per_s": {"bf16": 1e15, "tf32": 5e14, "fp32": 5e13}}))
    return bench_job, ceil


def _small(tmp_path: Path, src: Path, zero_out: bool = False) -> Path:
    """``src`` with a bench shape the interpreter runs 200 times a round in well under a second; ``zero_out``: its
    output starts as zeros, so a part it leaves unwritten is wrong for certain (``torch.empty`` may hand back the
    memory of an earlier call's right output: CI, 2026-12-07)."""
    text = src.read_text()
    if zero_out:
        assert "out = torch.empty_like(x)" in text
        text = text.replace("out = torch.empty_like(x)", "out = torch.zeros_like(x)")
    p = tmp_path / src.name
    p.write_text(text + "\nBENCH_SHAPES = [(200,)]\n")
    return p


def test_bench_checks_the_outputs_of_the_calls_it_times(bench_mod, tmp_path):
    """x02 is right on its first 39 calls and wrong on every later one: the judge's few calls see nothing (and
    without the state check it is verified on the CPU); the bench's timed calls are its 40th and later, and their
    outputs are compared with the reference. The initial kernel's and an honest variant's are checked and match."""
    bench_job, ceil = bench_mod
    task = _small(tmp_path, AXPY)
    cheat = _small(tmp_path, X / "x02_call_count_branchless.py", zero_out=True)
    honest = _small(tmp_path, HERE / "controls" / "axpy_block1024.py")
    out = bench_job.bench({"task": str(task), "device": "cpu", "rounds": 2, "ceilings_file": str(ceil),
                           "variants": [{"id": "initial", "path": str(task)}, {"id": "cheat", "path": str(cheat)},
                                        {"id": "honest", "path": str(honest)}]})
    entry = out["shapes"][0]
    assert entry["outputs_check"].startswith("outputs of the timed calls"), entry["outputs_check"]
    checked = {vid: v["outputs_checked"] for vid, v in entry["variants"].items()}
    assert checked["initial"]["calls"] >= 2 and checked["initial"]["mismatch"] is None, checked
    assert checked["honest"]["calls"] >= 2 and checked["honest"]["mismatch"] is None, checked
    # the last 30% of its output is left as zeros
    assert "elements off" in (checked["cheat"]["mismatch"] or ""), checked

    from tritondx.tools.verify import timing
    assert set(timing.timed_mismatches(out)) == {"cheat"}


def test_time_round_rejects_a_timed_output_mismatch(monkeypatch):
    """The orchestrator's side: a survivor the bench job names is rejected as ``timed_output_mismatch`` (and the
    report's verification records say so), the others stay."""
    from tritondx.tools.verify import timing
    result = {"shapes": [{"shape": [200], "dtype": "torch.float32", "variants": {
        "initial": {"median_ms": 1.0, "outputs_checked": {"calls": 4, "mismatch": None}},
        "c1": {"median_ms": 0.5, "outputs_checked": {"calls": 4, "mismatch": "round 1, last timed call: 60/200 off"}},
        "c2": {"median_ms": 0.9, "outputs_checked": {"calls": 4, "mismatch": None}}}}]}
    monkeypatch.setattr(timing, "bench_variants", lambda *a, **k: (result, "", 1.0))
    be = type("B", (), {"name": "cuda", "can_time": True})()
    out = timing.time_round("task.py", {}, [{"id": "c1", "path": "c1.py"}, {"id": "c2", "path": "c2.py"}], be, 2, 60)
    assert out.survivors == ["c2"]
    [rej] = out.rejected
    assert rej["candidate_id"] == "c1" and rej["klass"] == "timed_output_mismatch"
    assert "calls the benchmark timed" in rej["reason"] and "60/200 off" in rej["reason"]
