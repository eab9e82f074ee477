"""Shared machinery of the verifier's adversarial suite (tests/cpu/verifier).

Every case is one or a few ``verify_candidate`` calls, each a sandboxed worker process that takes
~5 s under the Triton interpreter (process start and imports dominate). The ``outcomes`` fixture
starts every selected case of the session at once on a small thread pool, slowest first (each job
is its own process, so threads are enough), and each test waits for its own case. A case is any
object with ``id``, ``cost`` and ``run()``, passed to a test as the parameter ``case``.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).parent
AXPY_TASK = HERE / "tiny_axpy.py"
SOFTMAX_TASK = HERE / "tiny_softmax.py"
WORKERS = max(2, min(4, os.cpu_count() or 2))


@pytest.fixture(scope="session")
def outcomes(request) -> dict[str, Future]:
    cases = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec is not None else None
        if case is not None and hasattr(case, "run"):
            cases.setdefault(case.id, case)
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="verify")
    futures = {cid: pool.submit(c.run) for cid, c in sorted(cases.items(), key=lambda kv: -kv[1].cost)}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)
