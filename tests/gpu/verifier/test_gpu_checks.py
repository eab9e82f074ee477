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
    from tritondx.tools.backends.base import get_backend
    from tritondx.tools.verify.api import verify_candidate
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
