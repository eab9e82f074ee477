"""GPU faults survived (need CUDA; marked ``gpu``; skipped elsewhere).

- An illegal memory access (a tl.store 2**40 elements out of bounds, no mask) corrupts the CUDA
  context of the worker process: the candidate is classified ``illegal_memory_access``, the worker is
  gone, and the next candidate, in a fresh worker, passes.
- GPU out of memory (a launcher asking for twice the device's memory): ``out_of_memory``, and the
  next candidate passes.
- Both inside one real `tritondx optimize --backend cuda` run (the rewriter's proposals come from
  candidates/ through the CPU suite's controlled-rewriter driver): the run finishes, the report
  records both failure classes, and the honest candidate is verified and timed.

Run on a GPU machine: ``python -m pytest tests/gpu/reliability -q -m gpu``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).resolve().parent
CPU_SUITE = HERE.parents[1] / "cpu" / "reliability"
TASK = CPU_SUITE / "tasks" / "tiny_axpy.py"
DRIVER = CPU_SUITE / "drivers" / "controlled_rewriter.py"
CANDIDATES = HERE / "candidates"


def _verify(candidate: Path):
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    return verify_candidate(str(TASK), str(candidate), candidate.stem, get_backend("cuda"), include_bench=True,
                            allowed_ops=["empty_like"], timeout=300)


@pytest.mark.parametrize("bad,klass,reason", [
    ("g1_illegal_access.py", "illegal_memory_access", "illegal memory access"),
    ("g2_gpu_oom.py", "out_of_memory", "out of memory"),
], ids=["illegal_memory_access", "gpu_out_of_memory"])
def test_gpu_fault_then_next_candidate_passes(bad: str, klass: str, reason: str):
    v = _verify(CANDIDATES / bad)
    assert not v.passed and v.klass == klass, f"{bad}: {v.klass}: {v.reason}"
    # the reason is the worker's exception line ("AcceleratorError: CUDA error: an illegal memory access was
    # encountered", "... launch() ran out of memory: OutOfMemoryError: CUDA out of memory ..."), or, should the
    # worker die instead of answering, the sandbox's "illegal_memory_access: <last stderr line>"
    assert reason in v.reason.lower().replace("_", " "), v.reason
    after = _verify(CANDIDATES / "g0_honest.py")  # a fresh worker, a fresh CUDA context
    assert after.passed, f"the honest candidate after {bad} failed: {after.klass}: {after.reason}"


def test_gpu_faults_inside_a_real_optimize_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TRITONDX_"))}
    env.update({"TRITONDX_TEST_CANDIDATES": str(CANDIDATES), "TRITONDX_RUNS": str(tmp_path / "runs"),
                "TRITONDX_CACHE": str(tmp_path / "cache"), "TRITONDX_VERIFY_TIMEOUT": "300",
                "TRITONDX_FINAL_PROFILE": "0", "TRITONDX_NCU": "0"})  # counters are not what this tests
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, str(DRIVER), "optimize", str(TASK), "--backend", "cuda", "--out", str(out),
                        "--max-rounds", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    by_file = {c["params"]["file"]: c for c in report["candidates"]}
    why = {f: {k: v for k, v in c.items() if k in ("rejection", "reason", "verification")} for f, c in by_file.items()}
    assert by_file["g1_illegal_access.py"]["rejection"] == "illegal_memory_access", why["g1_illegal_access.py"]
    assert by_file["g2_gpu_oom.py"]["rejection"] == "out_of_memory", why["g2_gpu_oom.py"]
    honest = by_file["g0_honest.py"]
    # passed and timed: verified in full when it beat the initial kernel, else passed the screen only (its 2^20
    # elements are launch-bound on an H200: 7.3 -> 5.1 us per call by ncu, not always measurably faster by wall
    # time; 2026-12-02). What this test checks is that the faults beside it did not take it down.
    why_honest = {k: honest.get(k) for k in ("verified", "screened", "rejection", "reason", "measurement", "speedup")}
    assert honest.get("rejection") is None and (honest["verified"] is True or honest.get("screened") is True), why_honest
    assert honest["measurement"] and honest["measurement"]["median_ms"] > 0, why_honest
