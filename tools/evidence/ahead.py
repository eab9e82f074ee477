"""The IR tier's capture of the initial kernel, started ahead of it in the background.

On a backend that measures no speed the verifier escalates after every round and the best stays the
initial kernel, so the IR tier is certain to compile that kernel for the run's target once round 1 is
verified. ``start`` runs that very capture (``capture_ir`` with the per-pass dumps, as ``passes_ahead``
makes it) in a thread of the run's process while round 1 is verified, into ``RUN/ir/ahead/``, where
``analysis.reusable_capture`` finds it: the IR tier (``analysis._capture``) first waits for an ahead
capture of the source it is about to compile (``join``; another source: no wait), then reuses it.

Only a whole capture counts: the job writes into ``ahead/partial/`` (one level below what
``reusable_capture`` reads), its files are then moved up and the manifest written last, atomically. A
capture that failed, or one an earlier process left half done (a resumed run), has no manifest there:
the IR tier compiles as it would have. The job is a sandboxed job (``run_job``): it dies with the run's
process (its lifeline); ``settle`` waits for it at the end of the run. Its own seconds, start to end,
are the phase ``ir_compile_ahead`` (``take_seconds``), which overlaps the run's other phases.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from tritondx.tools.backends.targets import adapter_for
from tritondx.tools.task.capture_job import capture_ir

log = structlog.get_logger(__name__)

#: the ahead capture's folder under the run's ``ir/``
FOLDER = "ahead"
#: the phase of its seconds (tools/run/phases.py)
PHASE = "ir_compile_ahead"


@dataclass
class AheadCapture:
    run_dir: str
    task_path: str
    sha256: str
    target: str
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    folder: Path | None = None        # the complete capture, once there
    error: str = ""
    accounted: bool = False           # its seconds are in some node's phases
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started


_jobs: dict[tuple[str, str], AheadCapture] = {}
_lock = threading.Lock()


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _key(run_dir: Path | str, target: str) -> tuple[str, str]:
    return str(Path(run_dir).resolve()), target


def start(task_path: str, target: str, run_dir: Path, timeout: float = 600) -> AheadCapture | None:
    """Start the IR capture of ``task_path`` for ``target`` in the background (one per run folder and target;
    the same source again: the one already started). None when there is none to start (an Ascend target:
    its tiers capture through their own bridge). Never raises."""
    if not adapter_for(target).triton_capture:
        return None
    try:
        key, sha = _key(run_dir, target), _sha(task_path)
    except OSError:
        return None
    with _lock:
        job = _jobs.get(key)
        if job is not None and job.sha256 == sha and not (job.done.is_set() and job.folder is None):
            return job
        if job is not None and not job.done.is_set():
            return None   # another source's capture still runs: it owns the folder
        job = _jobs[key] = AheadCapture(run_dir=key[0], task_path=str(task_path), sha256=sha, target=target)
        job.thread = threading.Thread(target=_run, args=(job, timeout), name="tdx-ir-ahead", daemon=True)
        job.thread.start()
    log.info("ir_capture_ahead_started", target=target)
    return job


def _run(job: AheadCapture, timeout: float) -> None:
    folder = Path(job.run_dir) / "ir" / FOLDER
    try:
        shutil.rmtree(folder, ignore_errors=True)  # what an earlier process left (never counted: no manifest)
        manifest, error = capture_ir(job.task_path, folder / "partial", job.target, per_pass=True, timeout=timeout)
        if manifest is None:
            job.error = error or "capture failed"
        else:
            job.folder = complete(folder, manifest)
    except Exception as exc:  # noqa: BLE001 - the IR tier then compiles as it would have
        job.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        job.ended = time.monotonic()
        job.done.set()
        log.info("ir_capture_ahead_done", ok=job.folder is not None, seconds=round(job.seconds, 2),
                 error=job.error[:200] or None)


def place_capture(manifest: dict, folder: Path, move: bool) -> dict:
    """A capture's files (every stage ``manifest`` lists) moved or copied into ``folder``, and the manifest with their
    new paths written there last and atomically: a folder with a manifest has all its files. Raises
    ``FileNotFoundError`` when a listed file is missing (nothing is written then but the files placed before it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rec in manifest["launches"]:
        for stage, path in list(rec.get("stages", {}).items()):
            src = Path(path)
            if not src.is_file():
                raise FileNotFoundError(f"the capture lists {src.name}, which is not there")
            dest = folder / src.name
            if move:
                os.replace(src, dest)
            else:
                shutil.copyfile(src, dest)
            rec["stages"][stage] = str(dest)
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, default=str))
    os.replace(tmp, folder / "manifest.json")
    return manifest


def complete(folder: Path, manifest: dict) -> Path:
    """The job's capture in ``folder/partial`` made a capture folder: its files moved up into ``folder``
    (``place_capture``), ``partial`` removed. Raises when a file is missing."""
    place_capture(manifest, folder, move=True)
    shutil.rmtree(folder / "partial", ignore_errors=True)
    return folder


def join(run_dir: Path, task_path: str, target: str) -> AheadCapture | None:
    """Wait for this run's ahead capture of ``task_path``'s source (same sha256) for ``target``, if one was
    started; None (no wait) when none was, or it is of another source."""
    with _lock:
        job = _jobs.get(_key(run_dir, target))
    if job is None:
        return None
    try:
        if _sha(task_path) != job.sha256:
            return None
    except OSError:
        return None
    job.done.wait()
    return job


def take_seconds(run_dir: Path) -> float:
    """The seconds of this run's ahead captures that have ended and are counted nowhere yet (each once)."""
    root, total = str(Path(run_dir).resolve()), 0.0
    with _lock:
        for (rd, _), job in _jobs.items():
            if rd == root and job.done.is_set() and not job.accounted:
                job.accounted = True
                total += job.seconds
    return round(total, 3)


def settle(run_dir: Path | None = None, timeout: float | None = None) -> None:
    """Wait for the ahead captures of ``run_dir`` (None: of every run) to end: the end of a run."""
    root = str(Path(run_dir).resolve()) if run_dir is not None else None
    with _lock:
        jobs = [j for (rd, _), j in _jobs.items() if root is None or rd == root]
    for job in jobs:
        job.done.wait(timeout)


def forget(run_dir: Path) -> None:
    """Drop this run's (ended) ahead captures from the registry: its run is over."""
    root = str(Path(run_dir).resolve())
    with _lock:
        for key in [k for k, j in _jobs.items() if k[0] == root and j.done.is_set()]:
            del _jobs[key]


def _forked() -> None:
    """In a forked child: the parent's captures and their threads are the parent's (a thread is not copied by
    fork: waiting for one would never end)."""
    global _lock
    _jobs.clear()
    _lock = threading.Lock()


atexit.register(settle)
os.register_at_fork(after_in_child=_forked)
