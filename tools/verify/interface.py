"""What the graph asks of verification, behind one small interface (``Verifier``), with two implementations:

- ``JudgeVerifier``: the trusted judge (``verification.verify_round``): every candidate in its own sandboxed runner,
  the verdict computed where candidate code never runs. Every run uses it unless its settings name another.
- ``NoopVerifier``: runs nothing and passes every candidate with scope ``"noop"``, which no report, table or
  command line calls verified (``writer.unchecked``). It is for the tests of what surrounds the judge (resume, batches,
  run folders, approvals, reports), so that only the judge's own tests (``tests/cpu/verifier``) pay for its processes;
  KernelAgent keeps its hardware behind ``KernelVerifier``/``KernelBenchmarker`` the same way. A run chooses it only
  through its settings (``RunConfig.verifier``, environment ``TRITONDX_VERIFIER=noop``; no command-line option), its
  ``run.json`` records the choice, and the command line says it at the start and on the result line.

The ``verify`` command (``check_file``) always asks the judge.
"""

from __future__ import annotations

from typing import Protocol

from tritondx.tools.backends.base import Backend
from tritondx.tools.records.verify import Verdict

#: what a no-op verdict says in place of a judge's reason
NOOP_REASON = "not checked: the no-op verifier ran in place of the judge (RunConfig.verifier = 'noop')"


class Verifier(Protocol):
    """Checks a round's candidates against their task: one verdict per candidate, in order."""

    name: str

    def verify(self, task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str],
               timeout: float, parallel: int, scope: str = "full") -> list[Verdict]: ...


class JudgeVerifier:
    """The trusted judge: one judge job for the round, each candidate in its own runner."""

    name = "judge"

    def verify(self, task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str],
               timeout: float, parallel: int, scope: str = "full") -> list[Verdict]:
        from tritondx.tools.verify.verification import verify_all
        return verify_all(task_path, candidates, backend, allowed_ops, timeout, parallel, scope=scope)


class NoopVerifier:
    """Passes every candidate without running it (scope ``"noop"``: never reported as verified)."""

    name = "noop"

    def verify(self, task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str],
               timeout: float, parallel: int, scope: str = "full") -> list[Verdict]:
        return [Verdict(candidate_id=c["id"], passed=True, reason=NOOP_REASON, backend=backend.name, scope="noop",
                        ran=["nothing: no-op verifier"]) for c in candidates]


VERIFIERS: dict[str, type] = {"judge": JudgeVerifier, "noop": NoopVerifier}


def verifier_named(name: str) -> Verifier:
    """The verifier a run's settings name (``RunConfig.verifier``)."""
    try:
        return VERIFIERS[name]()
    except KeyError:
        raise ValueError(f"unknown verifier {name!r}: one of {', '.join(VERIFIERS)}") from None
