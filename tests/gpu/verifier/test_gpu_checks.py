"""Checks that generalize, on the JIT path of a GPU (need CUDA; marked ``gpu``).

The CPU suite's derived-case candidates again (tests/cpu/verifier/checks), compiled for the GPU, and
a branch that only a size beyond the CPU budget reaches, which the GPU's larger budget checks.

Run on a GPU machine: ``python -m pytest tests/gpu/verifier/test_gpu_checks.py -q -m gpu``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent
CPU_SUITE = HERE.parents[1] / "cpu" / "verifier"
AXPY, SOFTMAX = CPU_SUITE / "tiny_axpy.py", CPU_SUITE / "tiny_softmax.py"
CHECKS = CPU_SUITE / "checks"


def _verify(task: Path, candidate: Path):
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    return verify_candidate(str(task), str(candidate), candidate.stem, get_backend("cuda"),
                            allowed_ops=["empty", "empty_like"], timeout=600)


CASES = [
    (AXPY, CHECKS / "k_even_wrong.py", "mismatch", r"shape \((\d+),\)", lambda n: n % 1024 == 0),
    (AXPY, CHECKS / "k_exact_listed_only.py", "mismatch", r"shape \((\d+),\)", lambda n: n > 4097),
    (SOFTMAX, CHECKS / "k_softmax_no_max.py", "mismatch", r"values large", None),
    (AXPY, HERE / "cheats" / "g13_branch_above_cpu_budget.py", "mismatch", r"shape \((\d+),\)",
     lambda n: n > 1 << 23),
]


@pytest.mark.parametrize("task,candidate,klass,pattern,check", CASES, ids=[c[1].stem for c in CASES])
def test_gpu_derived_case_rejects(task, candidate, klass, pattern, check):
    v = _verify(task, candidate)
    assert not v.passed and v.klass == klass, f"{candidate.name}: {v.klass}: {v.reason}"
    m = re.search(pattern, v.reason)
    assert m, v.reason
    if check is not None:
        assert check(int(m.group(1))), v.reason


def test_gpu_honest_even_variant_passes_with_both_sides_checked():
    v = _verify(AXPY, CHECKS / "k_even_right.py")
    assert v.passed, f"{v.klass}: {v.reason}"
    assert any("covered" in line and "true by" in line and "false by" in line for line in v.coverage), v.coverage


def test_gpu_a_benchmark_size_answer_crosses_the_pipe_with_the_device_given_back(tmp_path, monkeypatch):
    """On the GPU, a call whose answer is benchmark-size (a real Triton kernel, 2 x 64 MiB in, 64 MiB out) is
    announced by the runner (``runner.ANSWER_NOTE_BYTES``): the judge reads its bytes with the device hold given back,
    holds it again to rebuild them on the GPU, and gets the right values."""
    from tritondx.tools.exec import gpulock
    from tritondx.tools.verify.judge import spawn

    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    cand = Path(__file__).parents[2] / "cpu" / "verifier" / "tiny_axpy.py"
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(1 << 24, generator=g), torch.randn(1 << 24, generator=g)
    r = spawn.RunnerProcess(str(cand), "cuda", [], hide=[])
    try:
        assert r.hello.get("ok") and "compile_notes" in r._hello_msg, r.hello
        r.stage_case([x, y])
        with gpulock.phase("shared"):
            hold = gpulock.current_hold()
            ans = r.call([], staged="case", inputs_back=False)
            assert not hold.aside
        assert ans["diag"].get("error") is None, ans["diag"]
        got = ans["outs"][0]
        assert got.is_cuda and torch.allclose(got, (2.5 * x + y).cuda(), atol=1e-5, rtol=1e-5)   # the task's tolerance
        assert r.seconds["answers"] > 0.0, "the answer's bytes crossed the pipe under the hold"
    finally:
        r.close()
