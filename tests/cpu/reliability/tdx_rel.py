"""Helpers of the reliability suite (tests/cpu/reliability); conftest.py puts this folder on sys.path.

Almost every case here is one or more ``tritondx`` processes (the CLI as a user runs it), each of
which starts sandboxed worker processes; most of a case's wall time is process start-up, imports and
timeouts. The ``rel_outcomes`` fixture starts every selected case of the session at once on a small
thread pool, slowest first, and each test waits for its own case. A case is any object with ``id``,
``cost`` and ``run()``, passed to a test as the parameter ``rcase`` (a name of its own, so that the
verifier suite's pool, which collects ``case`` parameters, never runs these).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BAD = HERE / "bad_tasks"
TASK = HERE / "tasks" / "tiny_axpy.py"
CANDIDATES = HERE / "candidates"
DRIVER = HERE / "drivers" / "controlled_rewriter.py"
TRITONDX = shutil.which("tritondx") or str(Path(sys.executable).parent / "tritondx")
WORKERS = max(2, min(3, os.cpu_count() or 2))
# Environment variables a test run must not inherit from the developer's shell.
_DROP = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TRITONDX_LLM_MODEL", "TRITONDX_BACKEND", "TRITONDX_MAX_ROUNDS",
         "TRITONDX_PROBE_TIMEOUT", "TRITONDX_CANDIDATES_PER_ROUND", "TRITONDX_VERIFY_TIMEOUT", "TRITONDX_NO_NETNS")


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env.update({"TRITONDX_RUNS": str(tmp / "runs"), "TRITONDX_CACHE": str(tmp / "cache"),
                "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def cli_cmd(*args: str, driver: bool = False) -> list[str]:
    return [sys.executable, str(DRIVER), *args] if driver else [TRITONDX, *args]


def run_cli(*args: str, tmp: Path, env: dict[str, str] | None = None, timeout: float = 600,
            driver: bool = False) -> subprocess.CompletedProcess:
    """``tritondx ARGS`` in a subprocess, cwd ``tmp``, as a user runs it."""
    return subprocess.run(cli_cmd(*args, driver=driver), capture_output=True, text=True, timeout=timeout,
                          env=env or base_env(tmp), cwd=tmp)


def one_line(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


@dataclass(frozen=True)
class Case:
    """One background case: ``fn(tmp_dir)`` runs in the pool; its value goes to the test."""

    id: str
    fn: Callable[[Path], Any] = field(compare=False, repr=False)
    cost: float = 10.0

    def run(self, tmp: Path) -> Any:
        return self.fn(tmp)


def latest_state(db: Path, thread_id: str) -> tuple[dict, dict] | None:
    """(channel values, checkpoint) of a thread's newest checkpoint, read without writing the database
    (another process may be writing it); None while there is none."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    if not db.exists():
        return None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    try:
        t = SqliteSaver(con).get_tuple({"configurable": {"thread_id": thread_id}})
    except sqlite3.OperationalError:  # e.g. the tables are not created yet
        return None
    finally:
        con.close()
    return (t.checkpoint["channel_values"], t.checkpoint) if t else None


def wait_for(pred: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen | None = None,
             every: float = 0.25) -> Any:
    """Poll ``pred`` until it returns something truthy; fail after ``timeout`` or when ``proc`` exits."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"process exited ({proc.returncode}) before {what}:\n{err[-3000:]}")
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def processes_with_env(marker: str) -> list[int]:
    """PIDs of live processes whose environment holds ``marker`` (Linux /proc)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if marker.encode() in (d / "environ").read_bytes():
                stat = (d / "stat").read_text()
                if ") Z " not in stat:  # zombies are dead already
                    pids.append(int(d.name))
        except OSError:
            continue
    return pids


def log_events(run_dir: Path) -> list[dict]:
    import json
    path = run_dir / "log.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
