"""pytest plugin for device runs: each test's outcome, seconds and (on failure) the end of its report go to
``$TRITONDX_LIVE_REPORT`` (JSON lines) as the test ends, so a call cut off at its limit still returns what
ran (pytest's own summary and --junitxml are written only at the end). Works with xdist (the controller
receives every report). Use: ``PYTHONPATH=bench/scripts pytest -p pytest_live ...``."""

from __future__ import annotations

import json
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("TRITONDX_LIVE_REPORT")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller receives every worker's report and writes it once
    if not path or (report.when != "call" and report.outcome == "passed"):
        return  # setup and teardown are recorded only when they fail or skip
    row = {"test": report.nodeid, "when": report.when, "outcome": report.outcome,
           "seconds": round(report.duration, 2)}
    if report.outcome != "passed":
        text = report.longreprtext or ""
        row["message"] = text[-3000:]
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
