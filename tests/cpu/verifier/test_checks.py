"""Checks that generalize, end to end through ``verify_candidate`` (sandboxed, interpreter backend).

Each candidate here is exact at every CHECK_SHAPES entry with the task's own inputs, so it passed
the verifier before derived cases existed: it must now be rejected by the case that tools/verify/
cases.py derives for it (a size that makes an added branch true, a size beyond the listed ones,
large values for a softmax, a per-output tolerance), or by the branch-coverage rule. The controls
(honest variants, and a task that writes into a zero-filled cache) must pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.task.probe_job import probe_task
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
AXPY, SOFTMAX = HERE / "tiny_axpy.py", HERE / "tiny_softmax.py"
KV, ROWQUANT = HERE / "tiny_kv_scatter.py", HERE / "tiny_rowquant.py"
CORPUS = HERE.parents[2].parent / "shared" / "corpus"


@dataclass(frozen=True)
class Case:
    task: Path
    candidate: Path
    expect: str | None                 # rejection class; None: must pass
    reason: tuple[str, ...] = ()
    allowed_ops: tuple[str, ...] = ("empty", "empty_like")
    cost: float = 8.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"checks:{self.candidate.stem}:{self.expect or 'PASS'}")

    @property
    def candidate_path(self) -> Path:
        return self.candidate

    @property
    def round(self) -> tuple:
        """Verified with the other cases of its task in one round (verifier/conftest.py)."""
        return (self.task, True, self.allowed_ops, 300)

    def run(self) -> Verdict:
        return verify_candidate(str(self.task), str(self.candidate), self.candidate.stem,
                                get_backend("interpreter"), allowed_ops=list(self.allowed_ops), timeout=300)


K = HERE / "checks"
CASES = [
    # wrong only where EVEN = n % 1024 == 0: a derived size that is a multiple of BLOCK
    Case(AXPY, K / "k_even_wrong.py", "mismatch", ("got", "want")),
    # exact up to 4097 elements, off by 10 beyond: the derived larger size
    Case(AXPY, K / "k_exact_listed_only.py", "mismatch", ("larger",)),
    # an elementwise kernel right only inside randn's range: the large-values case every kernel gets
    Case(AXPY, K / "k_value_gate.py", "mismatch", ("values large",)),
    # no max pass: NaN once inputs are large
    Case(SOFTMAX, K / "k_softmax_no_max.py", "mismatch", ("values large", "NaN")),
    # a branch no checkable size reaches
    Case(AXPY, K / "k_unreachable_branch.py", "unchecked_branch", ("n > 1 << 30", "unreached")),
    # a kernel branch on the program id: the line trace shows its body never ran
    Case(AXPY, K / "k_dynamic_branch_unrun.py", "unchecked_branch", ("pid >= 1048576", "line trace never ran")),
    # scales 0.1% off: inside the loosest tolerance, outside the scales' own
    Case(ROWQUANT, K / "k_rowquant_scale_off.py", "mismatch", ("output 1", "rtol=1e-06")),
    Case(AXPY, K / "k_even_right.py", None),
    Case(ROWQUANT, ROWQUANT, None),
    Case(KV, KV, None, allowed_ops=("clone",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_checks_that_generalize(case: Case, outcomes):
    v = outcomes[case.id].result()
    if case.expect is None:
        assert v.passed, f"honest {case.candidate.name} rejected as {v.klass}: {v.reason}"
        assert v.checks > 4, f"{case.candidate.name}: only {v.checks} checks: no derived case ran"
        assert any("derived" in line for line in v.coverage), v.coverage
        return
    assert not v.passed, f"{case.candidate.name} PASSED the verifier"
    assert v.klass == case.expect, f"{case.candidate.name}: rejected as {v.klass} ({v.reason}), want {case.expect}"
    for part in case.reason:
        if part == "larger":
            n = int(re.search(r"shape \((\d+),\)", v.reason).group(1))
            assert n > 4097, v.reason
        else:
            assert part in v.reason, f"{case.candidate.name}: reason {v.reason!r} lacks {part!r}"
    if case.candidate.stem == "k_even_wrong":
        n = int(re.search(r"shape \((\d+),\)", v.reason).group(1))
        assert n % 1024 == 0, f"rejected at n={n}, not at a size that makes EVEN true: {v.reason}"


@pytest.mark.parametrize("task", [KV, CORPUS / "tbg_lightllm_destindex_copy_kv.py",
                                  CORPUS / "tbg_lightllm_quantize_kv_copy.py"], ids=lambda p: p.stem)
def test_probe_accepts_a_zero_filled_destination(task: Path):
    if not task.exists():
        pytest.skip("../shared/corpus absent")
    res = probe_task(str(task), get_backend("interpreter"))
    assert res["ok"] and res["n_outputs"] >= 1
