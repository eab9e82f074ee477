"""A batch's progress as it runs: a bar on a terminal, lines on stderr elsewhere."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from tritondx.batch_summary import _unmeasured


def _entry_word(entry: dict[str, Any]) -> str:
    """A finished task in one word or two, as summary.md's speedup cell says it."""
    if entry.get("speedup"):
        return f"{entry['speedup']:.2f}x"
    return _unmeasured(entry)


class BatchProgress:
    """A batch's progress: on a terminal a bar (rich); elsewhere (a pipe, a log file, CI) lines on stderr: one
    per finished task and, while tasks run and nothing was said for ``every`` seconds (``TRITONDX_HEARTBEAT_S``,
    15), one naming the running tasks and how long each has run."""

    def __init__(self, total: int, done: int, out_dir: Path, terminal: bool | None = None,
                 every: float | None = None) -> None:
        from tritondx.logs import heartbeat_every
        self.total, self.count = total, done
        self.terminal = sys.stdout.isatty() if terminal is None else terminal
        self.every = every or heartbeat_every()
        self.running: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last = time.monotonic()
        self._bar = self._thread = None
        if self.terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
            self._bar.start()
            self._bar_id = self._bar.add_task("tritondx batch", total=total, completed=done)
        else:
            self.say(f"{total} task(s)" + (f", {done} finished earlier" if done else "") + f"; results in {out_dir}")
            self._thread = threading.Thread(target=self._loop, name="tdx-batch-progress", daemon=True)
            self._thread.start()

    def say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} batch: {text}", file=sys.stderr, flush=True)
        self._last = time.monotonic()

    def started(self, task: str) -> None:
        with self._lock:
            self.running[task] = time.monotonic()

    def finished(self, entry: dict[str, Any]) -> None:
        with self._lock:
            t0 = self.running.pop(entry["task"], None)
            if entry["status"] != "skipped":
                self.count += 1
            count = self.count
        if self._bar is not None:
            self._bar.update(self._bar_id, advance=1, description=f"{entry['task']}: {_entry_word(entry)}")
        elif entry["status"] == "skipped":
            self.say(f"{entry['task']}: skipped (the deadline had passed)")
        else:
            took = entry.get("wall_s") or (time.monotonic() - t0 if t0 else None)
            self.say(f"[{count}/{self.total}] {entry['task']}: {_entry_word(entry)}"
                     + (f" ({took:.0f} s)" if took else ""))

    def beat(self) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        with self._lock:
            running = sorted(self.running.items(), key=lambda kv: kv[1])
            count = self.count
        if running:
            names = ", ".join(f"{t} {now - t0:.0f} s" for t, t0 in running)
            self.say(f"{len(running)} running ({names}); {count}/{self.total} finished")
        else:
            self.say(f"{count}/{self.total} finished; waiting for the running tasks")

    def _loop(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            try:
                self.beat()
            except Exception:  # progress only
                pass

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._bar is not None:
            self._bar.stop()
