"""Exclusive device time for timing while several tasks run at once (batch workers).

Verification and other device work take the lock shared; timing takes it exclusive, so no other
kernel runs on the GPU while a measurement is taken. A turnstile keeps a stream of shared holders
from starving the timer. Without ``TRITONDX_LOCK_DIR`` (single runs) both are no-ops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


def _lock_dir() -> Path | None:
    d = os.environ.get("TRITONDX_LOCK_DIR")
    if not d:
        return None
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    with open(path, "a+") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def gpu_shared():
    d = _lock_dir()
    if d is None:
        yield
        return
    with _flock(d / "turnstile.lock", fcntl.LOCK_EX):
        pass
    with _flock(d / "gpu.lock", fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def gpu_exclusive():
    d = _lock_dir()
    if d is None:
        yield
        return
    with open(d / "turnstile.lock", "a+") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            with _flock(d / "gpu.lock", fcntl.LOCK_EX):
                fcntl.flock(turnstile, fcntl.LOCK_UN)
                yield
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
