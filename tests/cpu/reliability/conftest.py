"""The reliability suite's background pool (see tdx_rel.py for the helpers and the Case type)."""

from __future__ import annotations

import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tdx_rel import WORKERS  # noqa: E402


# A test that reads a background case waits for the pool to reach it (cases run longest first), not
# only for its own case: on a loaded 2-core machine the first cheap case was reached after > 600 s
# (the suite's per-test limit). Each case has its own timeout inside (run_cli), so the wait is bounded.
POOL_WAIT_TIMEOUT_S = 3600


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "rel_outcomes" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(POOL_WAIT_TIMEOUT_S))


@pytest.fixture(scope="session")
def rel_outcomes(request, tmp_path_factory, case_futures) -> dict[str, Future]:
    """Serially: every selected case of the session started at once, slowest first. Under pytest-xdist a worker
    runs only the tests the scheduler sends it (a pool of every case would run each case once per worker): a case
    starts when its test asks, and the workers run the cases side by side."""
    cases: dict[str, Any] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("rcase") if callspec is not None else None
        if case is not None and hasattr(case, "run"):
            cases.setdefault(case.id, case)
    return case_futures(cases, lambda cid: cases[cid].run(tmp_path_factory.mktemp(cid[:40].replace("/", "_"),
                                                                                  numbered=True)),
                        WORKERS, "reliability")
