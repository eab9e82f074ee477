"""How long the device was held while a batch ran (the batch side of ``gpulock``): a sampler that tries each
lock folder's device lock without waiting, every few milliseconds. Jobs take the locks in ``gpulock.phase``;
nothing here holds a lock longer than one try."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path


class HeldSampler:
    """How long the device was held while a batch ran, sampled from its lock folders (the batch side;
    jobs take the locks in ``phase``). Every ``interval`` s each folder's device lock is tried without
    waiting: exclusive fails while any job holds it (``held_s``); shared fails only while a timer holds
    it exclusively (``exclusive_s``). A successful try is released at once (a job that asks in that
    instant waits microseconds). Several folders (one per GPU) add up."""

    def __init__(self, folders: list[str | Path], interval: float = 0.05) -> None:
        self.folders = sorted({str(Path(f)) for f in folders})
        self.interval = interval
        self.held_s = 0.0
        self.exclusive_s = 0.0
        self.wall_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tritondx-held-sampler", daemon=True)

    def __enter__(self) -> "HeldSampler":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.wall_s = time.monotonic() - self._t0

    def _probe(self, folder: str) -> tuple[bool, bool]:
        """(held, held exclusively) right now."""
        path = Path(folder) / "gpu.lock"
        if not path.exists():
            return False, False
        fd = os.open(path, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False, False
            except BlockingIOError:
                pass
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return True, False
            except BlockingIOError:
                return True, True
        finally:
            os.close(fd)  # closing releases whatever this descriptor got

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            dt, last = now - last, now
            for f in self.folders:
                try:
                    held, excl = self._probe(f)
                except OSError:
                    continue
                self.held_s += dt if held else 0.0
                self.exclusive_s += dt if excl else 0.0

    def summary(self) -> dict[str, float]:
        devices = max(1, len(self.folders))
        wall = self.wall_s or (time.monotonic() - getattr(self, "_t0", time.monotonic()))
        return {"wall_s": round(wall, 2), "devices": devices, "held_s": round(self.held_s, 2),
                "exclusive_s": round(self.exclusive_s, 2),
                "held_fraction": round(self.held_s / (wall * devices), 4) if wall > 0 else 0.0}
