"""Shared machinery of the verifier's adversarial suite (tests/cpu/verifier).

A case is any object with ``id``, ``cost`` and ``run()``, passed to a test as the parameter ``case``. A case with a
``round`` (task, static policy on, allowed ops, timeout) and a ``candidate_path`` is verified together with the
other cases of the same round in one ``verify_round``, the path the rewriter's candidates take (one judge job or
server for the task; the original, the check cases and their references made once; a runner forked per candidate
where that is safe): the six files that do so took 354 CPU-s one cold job per case and take 60 now (2026-12-07).
Other cases (``run()``: one ``verify_candidate``, a sandboxed job of its own, ~3 CPU-s under the interpreter) run
alone. The ``outcomes`` fixture starts every selected case (or round) of the session at once on a small thread pool,
slowest first, and each test waits for its own case.

Under pytest-xdist (``scripts/test.sh``) a worker runs only the tests the scheduler sends it, so a pool of every
case would run each case once per worker: there a case (or its round) starts when its test asks for it, and the
tests of one round are put on one worker (``tests/cpu/conftest.py``).
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path

import pytest

HERE = Path(__file__).parent
AXPY_TASK = HERE / "tiny_axpy.py"
SOFTMAX_TASK = HERE / "tiny_softmax.py"
WORKERS = max(2, min(4, os.cpu_count() or 2))


@pytest.fixture(scope="session")
def outcomes(request, case_futures) -> dict[str, Future]:
    cases = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec is not None else None
        if case is not None and hasattr(case, "run"):
            cases.setdefault(case.id, case)
    return case_futures(cases, lambda cid: cases[cid].run(), WORKERS, "verify",   # tests/cpu/conftest.py
                        run_round=lambda cids: verify_in_round([cases[c] for c in cids]))


def verify_in_round(cases: list) -> dict:
    """The cases' candidates (each ``case.candidate_path``; one ``case.round``: task, static policy on, allowed
    ops, timeout per candidate) as one round of the judge, as the
    rewriter's candidates are verified (``verification.verify_round``: one judge job, the original and the check
    cases made once, a runner forked per candidate where that is safe): ``{case.id: Verdict}``."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_round
    (key,) = {c.round for c in cases}
    task, static_policy, allowed_ops, timeout = key
    cands = [{"id": c.id, "path": str(c.candidate_path)} for c in cases]
    verdicts = verify_round(str(task), cands, get_backend("interpreter"), list(allowed_ops), timeout, 1,
                            static_policy=static_policy)
    return {v.candidate_id: v for v in verdicts}
