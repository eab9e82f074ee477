"""Shared machinery of the verifier's adversarial suite (tests/cpu/verifier).

Every case is one or a few ``verify_candidate`` calls, each a sandboxed worker process that takes
~5 s under the Triton interpreter (process start and imports dominate). The ``outcomes`` fixture
starts every selected case of the session at once on a small thread pool, slowest first (each job
is its own process, so threads are enough), and each test waits for its own case. A case is any
object with ``id``, ``cost`` and ``run()``, passed to a test as the parameter ``case``.

Under pytest-xdist (``scripts/test.sh``) a worker runs only the tests the scheduler sends it, so a pool of every
case would run each case once per worker: there a case starts when its test asks for it, and the workers run the
cases side by side.
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
    return case_futures(cases, lambda cid: cases[cid].run(), WORKERS, "verify")   # tests/cpu/conftest.py
