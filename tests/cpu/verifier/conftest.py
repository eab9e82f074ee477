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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).parent
AXPY_TASK = HERE / "tiny_axpy.py"
SOFTMAX_TASK = HERE / "tiny_softmax.py"
WORKERS = max(2, min(4, os.cpu_count() or 2))


class OnDemand(dict):
    """Futures by case id, each started on first look-up (``start(case_id)``)."""

    def __init__(self, start):
        super().__init__()
        self._start = start

    def __missing__(self, cid: str) -> Future:
        f = self[cid] = self._start(cid)
        return f


@pytest.fixture(scope="session")
def outcomes(request) -> dict[str, Future]:
    cases = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec is not None else None
        if case is not None and hasattr(case, "run"):
            cases.setdefault(case.id, case)
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="verify")
    if hasattr(request.config, "workerinput"):   # an xdist worker: this worker's tests only, when they ask
        futures = OnDemand(lambda cid: pool.submit(cases[cid].run))
    else:
        futures = {cid: pool.submit(c.run) for cid, c in sorted(cases.items(), key=lambda kv: -kv[1].cost)}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)
