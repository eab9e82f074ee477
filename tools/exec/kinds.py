"""The job kinds a sandboxed worker runs, and the function that does each: the worker's allowlist.

A job is ``{"kind": ..., ...}``, written by the trusted orchestrator. Each kind is implemented by the module
that owns it (the judge in ``tools/verify``, the bench in ``tools/bench``, the tuner's job in ``tools/tune``);
the worker finds that function here, by name, and imports it with ``importlib`` only when a job of that kind
runs. So ``exec/`` imports nothing above it: the names below are data, not imports.

The trust boundary: the worker imports only the modules named in these tables, never a module a job (or a
task, or a candidate) names. A kind that is not here is an error.

Adding a job kind: write ``def my_job(job: dict) -> dict`` in the module that owns the work, add
``"my_kind": "tritondx.tools.<folder>.<module>:my_job"`` to ``JOB_KINDS`` and start it with
``sandbox.run_job({"kind": "my_kind", ...})``. A handler answers a dict (the job's result); it raises
``exec/rejected.Rejected`` when the subject of the job fails it (the result's ``class`` and ``error``); any
other exception is classified by the worker (``worker.run``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

#: job kind -> "module:function" taking the job and answering its result
JOB_KINDS: dict[str, str] = {
    "probe": "tritondx.tools.verify.judge.probe:probe",        # task format at run time
    "verify": "tritondx.tools.verify.judge.job:verify",        # correctness and integrity of candidates
    "hwcheck": "tritondx.tools.verify.judge.hwcheck:hwcheck",  # ncu's kernel time of the initial and best kernel
    "bench": "tritondx.tools.bench.bench:bench",              # side-by-side timing on a GPU
    "ceilings": "tritondx.tools.bench.bench:measure_ceilings",  # device bandwidth and matmul rates
    "capture": "tritondx.tools.bench.capture:capture",        # IR for a target
    "launch": "tritondx.tools.bench.launch:run_launch",       # one launcher call (under an external profiler)
    "tune": "tritondx.tools.tune.job:tune",                   # the tuner's timing of configurations
}

#: job kind -> "module:function" the worker calls with the job first thing, before it imports anything heavy
#: (torch): work that then runs beside that import (a round's warm runners: ``verify/judge/prestart.py``)
EARLY: dict[str, str] = {
    "verify": "tritondx.tools.verify.judge.prestart:start",
}

#: job kind of a long-lived job (``worker --serve``, ``exec/server.py``) -> "module:class": built with the job,
#: its ``handle(request) -> answer`` called for every request
SERVICES: dict[str, str] = {
    "judge": "tritondx.tools.verify.judge.server:JudgeService",  # every round's ``verify`` of one task
}


def _load(table: dict[str, str], kind: Any, what: str) -> Callable[..., Any]:
    name = table.get(kind) if isinstance(kind, str) else None
    if name is None:
        raise ValueError(f"unknown {what} {kind!r}")
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def handler(kind: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function that does a job of ``kind`` (ValueError for a kind not in ``JOB_KINDS``)."""
    return _load(JOB_KINDS, kind, "job kind")


def early(kind: Any) -> Callable[[dict[str, Any]], None] | None:
    """The function a job of ``kind`` runs first thing, or None."""
    return _load(EARLY, kind, "job kind") if isinstance(kind, str) and kind in EARLY else None


def service(kind: Any) -> Callable[[dict[str, Any]], Any]:
    """The class of the long-lived job of ``kind`` (ValueError for a kind not in ``SERVICES``)."""
    return _load(SERVICES, kind, "service for job kind")
