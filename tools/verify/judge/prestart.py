"""A round's warm runners started first thing in its judge job (trusted side; imports no torch).

A warm runner (``warm.py``) takes ~3 s to start (Python, torch, Triton); the judge itself takes about as
long to import torch. The worker (``exec/worker.py``) calls :func:`start` (registered for ``verify`` jobs in
``exec/kinds.py``) before it imports the judge,
so both run side by side on their own cores instead of one after the other. The seal key leaves the
environment before anything is started (a runner's environment keeps ``TRITONDX_JOB_*`` names:
``sandbox.scrubbed_env``); :func:`key` hands it to the judge.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tritondx.tools.verify.judge import seal

_taken: dict[str, Any] = {}


def slots(job: dict[str, Any]) -> int:
    """Candidates checked at once: one warm runner per candidate up to ``parallel`` (the job caps it at
    the CPU count): their starts run side by side, so a slot per candidate costs no wall time (the
    example's round of 2 on 2 cores: 16.5 s one at a time, 13.0 s two at once). On a GPU too: most of a
    candidate's checks is CPU (its runner's start, Triton compiles), and the device phases of the judge's
    threads are one shared hold (``gpulock._shared``); one at a time where every phase is exclusive (a
    retry after running out of device memory)."""
    from tritondx.tools.exec.gpulock import JOB_ALONE_ENV
    cands = job.get("candidates") or []
    parallel = max(1, int(job.get("parallel") or 1)) if os.environ.get(JOB_ALONE_ENV) != "1" else 1
    return max(1, min(parallel, len(cands)))


def start(job: dict[str, Any]) -> None:
    """The ``verify`` job's first step (``exec/kinds.py`` ``EARLY``): for a round (``candidates``), take the seal
    key out of the environment, then start the round's warm runners (``RunnerPool``) beside the imports, in a thread
    of their own. A single candidate's job: nothing."""
    if not job.get("candidates"):
        return
    _taken["key"] = seal.take_key()
    from tritondx.tools.verify.judge.warm import RunnerPool
    starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-warm")
    _taken["pool"] = (starter, starter.submit(RunnerPool, job["device"], [os.getcwd()], slots(job)))


def key() -> str:
    """The seal key: taken by :func:`start`, else out of the environment now."""
    return _taken.pop("key", None) or seal.take_key()


def pool() -> tuple[ThreadPoolExecutor, Future] | None:
    """(the starter thread, the future of the ``RunnerPool``) started by :func:`start`, once; else None."""
    return _taken.pop("pool", None)
