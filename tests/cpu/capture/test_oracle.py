"""Oracle mode through the real verifier: the captured task verifies against the original kernel; a candidate
that changes results is rejected; one that only changes launch settings passes."""

from __future__ import annotations

import shutil

import pytest

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.task.probe_job import probe_task
from tritondx.tools.verify.verification import verify_candidate


@pytest.fixture(scope="session")
def backend():
    return get_backend("interpreter")


def _candidate(task, tmp_path, old: str, new: str, edit):
    cand = tmp_path / f"cand_{task.stem}.py"
    cand.write_text(edit(task.read_text(), old, new))
    return cand


def test_captured_task_probes_and_verifies_against_the_original(captured, backend, tmp_path):
    out, _ = captured
    task = out / "scale_add_kernel.py"
    probe = probe_task(str(task), backend)
    assert probe["ok"]
    v = verify_candidate(str(task), str(task), "initial", backend, allowed_ops=probe.get("ops", []), timeout=600)
    assert v.passed, v.reason


def test_a_candidate_that_changes_results_is_rejected(captured, backend, tmp_path, edit):
    out, _ = captured
    task = out / "scale_add_kernel.py"
    probe = probe_task(str(task), backend)
    # the kernel copy now adds 1% of y too much: launch and the task's own reference would agree, the oracle
    # (the original task's kernel) does not
    cand = _candidate(task, tmp_path, "_scale(x, alpha) + y, mask=mask)", "_scale(x, alpha) + y * 1.01, mask=mask)",
                      edit)
    v = verify_candidate(str(task), str(cand), "c1", backend, allowed_ops=probe.get("ops", []), timeout=600)
    assert not v.passed and v.klass == "mismatch", (v.klass, v.reason)


def test_a_reduction_candidate_within_the_derived_tolerance_passes(captured, backend, tmp_path, edit):
    out, _ = captured
    task = out / "row_sum_kernel.py"
    probe = probe_task(str(task), backend)
    # a larger block (a different summation order) is a legitimate rewrite
    cand = _candidate(task, tmp_path, "    BLOCK = 32\n    grid", "    BLOCK = 128\n    grid", edit)
    v = verify_candidate(str(task), str(cand), "c2", backend, allowed_ops=probe.get("ops", []), timeout=600)
    assert v.passed, v.reason
    shutil.rmtree(tmp_path, ignore_errors=True)
