"""Attacks on the verifier's trust boundary (issue 15), through ``verify_candidate``.

Each file under attacks/ attacks a class the single-process design let through: verdict forgery,
patching the checker, patching the task, escaping the Triton-only check, seed prediction. Every
attack is run with the static source policy OFF (``static_policy=False``), so what rejects it is
the run-time design: the judge process that never imports candidate code, the runner's recorders,
the sealed verdict. A second test checks that the source policy alone rejects each of them too
(the first line a real run has). README.md lists what each defense is and which attack fails
without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate
from tritondx.tools.verify.policy import check as policy_check

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
ALLOWED_OPS = ["empty", "empty_like"]


@dataclass(frozen=True)
class Attack:
    name: str
    cls: str
    expect: str
    reason: tuple[str, ...] = ()
    task: Path = AXPY
    cost: float = 8.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"attack:{self.name}")

    @property
    def path(self) -> Path:
        return HERE / "attacks" / f"{self.name}.py"

    @property
    def candidate_path(self) -> Path:
        return self.path

    @property
    def round(self) -> tuple:
        """Verified with the other attacks on its task in one round (verifier/conftest.py)."""
        return (self.task, False, tuple(ALLOWED_OPS), 300)

    def run(self) -> Verdict:
        return verify_candidate(str(self.task), str(self.path), self.name, get_backend("interpreter"),
                                allowed_ops=ALLOWED_OPS, timeout=300, static_policy=False)


ATTACKS = [
    Attack("f01_result_file_at_import", "verdict forgery", "no_result", ("without answering",)),
    Attack("f02_exit_zero_in_launch", "verdict forgery", "no_result", ("without answering",)),
    Attack("f03_forged_answer_frame", "verdict forgery", "no_result", ("without answering",)),
    Attack("p01_sys_modules_compare", "patching the checker", "mismatch", ("NaN",)),
    Attack("p02_tensor_any", "patching the checker", "mismatch", ("NaN",)),
    Attack("t01_empty_original_checks", "patching the task", "mismatch", ("shape (1000,)",)),
    Attack("e01_torch_in_thread", "escaping the Triton-only check", "threads", ("thread",)),
    Attack("e02_thread_started_at_import", "escaping the Triton-only check", "threads", ("importing the candidate",)),
    Attack("e03_flag_kernel_host_lists", "escaping the Triton-only check", "host_compute", ("tolist",)),
    Attack("e04_guard_from_frame", "escaping the Triton-only check", "torch_compute", ("streamed", "'mul'")),
    Attack("s01_seed_from_job_file", "seed prediction", "mismatch", ("NaN",)),
    Attack("s02_seed_from_environment", "seed prediction", "mismatch", ("NaN",)),
]


@pytest.mark.parametrize("case", ATTACKS, ids=[a.id for a in ATTACKS])
def test_attack_is_rejected_at_run_time(case: Attack, outcomes):
    v = outcomes[case.id].result()
    assert not v.passed, f"{case.name} PASSED the verifier: {case.cls} not caught"
    assert v.klass == case.expect, f"{case.name}: rejected as {v.klass} ({v.reason}), want {case.expect}"
    for part in case.reason:
        assert part in v.reason, f"{case.name}: reason {v.reason!r} lacks {part!r}"
    assert v.seconds > 0, "a run-time case must have run a job"


@pytest.mark.parametrize("case", ATTACKS, ids=[a.name for a in ATTACKS])
def test_the_source_policy_rejects_the_attack_too(case: Attack):
    bad = policy_check(case.path.read_text(), case.task.read_text())
    assert bad is not None, f"{case.name}: the static policy lets it through"


def test_every_attack_file_has_a_case_and_a_readme_row():
    files = {p.stem for p in (HERE / "attacks").glob("*.py")}
    assert files == {a.name for a in ATTACKS}
    readme = (HERE / "README.md").read_text()
    assert not [a.name for a in ATTACKS if f"{a.name}.py" not in readme]


PROBES = sorted((HERE / "envprobes").glob("*.py"))


@pytest.mark.parametrize("path", PROBES, ids=[p.stem for p in PROBES])
def test_a_launcher_that_reads_its_environment_is_rejected_before_it_runs(path: Path):
    """Environment probes (a thread count, a clock) are honest inside the verifier's runner and wrong
    anywhere else, so no run-time check can see them: the static policy rejects what the original does
    not read. Run-time first (static policy off: it passes, which is why the policy rule exists), then
    through the verifier as a user runs it."""
    loose = verify_candidate(str(AXPY), str(path), path.stem, get_backend("interpreter"), allowed_ops=ALLOWED_OPS,
                             timeout=300, static_policy=False)
    assert loose.passed, f"{path.stem}: expected honest inside the runner, got {loose.klass}: {loose.reason}"
    v = verify_candidate(str(AXPY), str(path), path.stem, get_backend("interpreter"), allowed_ops=ALLOWED_OPS)
    assert not v.passed and v.klass == "environment_probe", (v.klass, v.reason)
    assert policy_check(AXPY.read_text(), AXPY.read_text()) is None  # the original itself is clean
