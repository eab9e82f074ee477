"""Exclusive device time for timing while several tasks run at once (batch workers).

Device work takes the lock shared; timing takes it exclusive, so no other kernel runs on the GPU
while a measurement is taken. A turnstile keeps a stream of shared holders from starving the timer.
Without ``TRITONDX_LOCK_DIR`` (single runs) everything here is a no-op.

The lock is held *inside* the jobs, around the parts that touch the device, not around whole jobs:
a job spends most of its life starting Python, importing torch and compiling, and holding the lock
through that made every measurement wait for the slowest verification to finish (batch wall time
was mostly lock waits). The orchestrator opens the two lock files afresh for each job and hands the
descriptors over (``job_lock_fds``); the job takes them in ``phase("shared")`` /
``phase("exclusive")``. A job that another program starts (the launch job under Nsight Compute)
gets the folder's path instead and opens the files itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

JOB_LOCK_ENV = "TRITONDX_JOB_GPU_LOCK"  # "<turnstile fd>,<gpu fd>" in a job's environment
JOB_ALONE_ENV = "TRITONDX_JOB_ALONE"    # "1": every phase of the job is exclusive (a retry after a CUDA OOM)
JOB_LOCK_DIR_ENV = "TRITONDX_JOB_LOCK_DIR"  # a job started through another program (ncu): the folder itself
_OPENED: tuple[int, int] | None = None
# This process's device time: seconds inside shared / exclusive phases, and seconds spent waiting to
# enter them. A job's wall time is mostly Python start-up, imports and compiles, and under a busy batch
# also these waits; what it held the device for is the cost that compares across loads.
_USAGE = {"shared_s": 0.0, "exclusive_s": 0.0, "wait_s": 0.0}


def usage() -> dict[str, float]:
    """Seconds this process held the device (``shared_s``, ``exclusive_s``) and waited for it (``wait_s``)."""
    return {k: round(v, 4) for k, v in _USAGE.items()}


def held_seconds(u: dict | None) -> float:
    """Seconds a job held the device, from its ``device_usage`` (0 when it reported none)."""
    return float((u or {}).get("shared_s", 0.0)) + float((u or {}).get("exclusive_s", 0.0))


def _lock_dir() -> Path | None:
    d = os.environ.get("TRITONDX_LOCK_DIR")
    if not d:
        return None
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def _acquire(turnstile: int, gpu: int, mode: str) -> None:
    if mode == "exclusive":
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(gpu, fcntl.LOCK_EX)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    else:  # pass through the turnstile: wait behind a timer that is already queued
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(gpu, fcntl.LOCK_SH)


def _open_pair(d: Path) -> tuple[int, int]:
    """Fresh descriptors (own open file descriptions) of the turnstile and the device lock in ``d``."""
    return (os.open(d / "turnstile.lock", os.O_RDWR | os.O_CREAT, 0o600),
            os.open(d / "gpu.lock", os.O_RDWR | os.O_CREAT, 0o600))


@contextlib.contextmanager
def job_lock_fds():
    """Orchestrator side: fresh descriptors of the lock files for one job (its own open file
    descriptions, so two jobs never share a lock). Yields (fds to pass, env to add); empty when
    there is no lock directory."""
    d = _lock_dir()
    if d is None:
        yield (), {}
        return
    t, g = _open_pair(d)
    try:
        yield (t, g), {JOB_LOCK_ENV: f"{t},{g}"}
    finally:
        os.close(t)
        os.close(g)


def _job_fds() -> tuple[int, int] | None:
    """The job's lock descriptors: handed over by the orchestrator, or (for a job that a profiler
    such as ncu starts, which need not pass descriptors on) opened once from the folder's path."""
    global _OPENED
    spec = os.environ.get(JOB_LOCK_ENV, "")
    try:
        t, g = (int(x) for x in spec.split(","))
        return t, g
    except ValueError:
        pass
    d = os.environ.get(JOB_LOCK_DIR_ENV)
    if not d:
        return None
    if _OPENED is None:
        _OPENED = _open_pair(Path(d))
    return _OPENED


@contextlib.contextmanager
def phase(mode: str):
    """Job side: hold the device ``"shared"`` (any device work) or ``"exclusive"`` (timing) for
    the block. Without a lock it only counts the seconds (``usage``). Not re-entrant: leave one phase
    before entering another."""
    t0 = time.monotonic()
    fds = _job_fds()
    if fds is None:
        try:
            yield
        finally:
            _USAGE[f"{mode}_s"] += time.monotonic() - t0
        return
    t, g = fds
    if os.environ.get(JOB_ALONE_ENV) == "1":
        mode = "exclusive"
    _acquire(t, g, mode)
    t1 = time.monotonic()
    _USAGE["wait_s"] += t1 - t0
    try:
        yield
    finally:
        fcntl.flock(g, fcntl.LOCK_UN)
        _USAGE[f"{mode}_s"] += time.monotonic() - t1
