"""Orchestrator side of the judge server (``judge/server.py``): one per task, started once (after the
probe, beside the first rewrite), asked for every round's verification, ended with the run.

Only where the jobs' sandbox is read-only (``sandbox.isolation().readonly``: bubblewrap or unshare):
there every runner it starts is in namespaces of its own with the server's folder hidden, and the server
can remove what a request left. Elsewhere, and with ``TRITONDX_JUDGE_SERVER=0``, each round is one
judge job as before. A request whose environment differs from the server's (a retry with the device
alone) is a one-shot job too.

Candidates reach the server as copies in its scratch folder, written here before the request (the
sandbox shows a job only the folders known when it started); runners never see that folder.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from tritondx.tools.backends.base import Backend
from tritondx.tools.exec import triton_cache
from tritondx.tools.exec.sandbox import JobResult, isolation
from tritondx.tools.exec.server import JobServer
from tritondx.tools.exec.jobs import DEFAULT_MEMORY_BYTES

log = structlog.get_logger(__name__)

SERVER_ENV = "TRITONDX_JUDGE_SERVER"
#: servers kept at once by one process (a run has one task; a test or a script may verify several)
MAX_SERVERS = 2

_lock = threading.Lock()
_servers: dict[tuple, JobServer] = {}
# Servers are started from this one long-lived thread: a job dies with the thread that started it
# (parent-death signal), and graph nodes may run in threads that end.
_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-judge-server")


def enabled() -> bool:
    return os.environ.get(SERVER_ENV, "1") != "0" and isolation().readonly


def server_env(task_path: str, backend: Backend) -> dict[str, str]:
    """What a judge job of this task gets in its environment, server or one-shot (no seal key: a server gets
    one per request, a one-shot job in its own environment)."""
    env = dict(backend.job_env())
    if triton_cache.enabled():  # read the original's trusted compiles, never write them
        env.update(triton_cache.reader_env(Path(task_path).read_text()))
    return env


def _key(task_path: str, backend: Backend, slots: int) -> tuple:
    src = Path(task_path).read_bytes()
    env = tuple(sorted(server_env(task_path, backend).items()))
    return (str(Path(task_path).resolve()), hashlib.sha256(src).hexdigest(), backend.name, slots, env,
            os.environ.get("TRITONDX_LOCK_DIR", ""))


def slots_for(parallel: int) -> int:
    return max(1, min(parallel, os.cpu_count() or 1))


def _start(key: tuple, task_path: str, backend: Backend, slots: int) -> JobServer:
    job = {"kind": "judge", "task": str(Path(task_path).resolve()), "device": backend.torch_device, "slots": slots}
    return JobServer(job, env=server_env(task_path, backend), memory_bytes=DEFAULT_MEMORY_BYTES.get(backend.name),
                     gpu_lock=backend.can_time)


def server_for(task_path: str, backend: Backend, parallel: int) -> JobServer | None:
    """The task's running judge server (started now if there is none), or None where none is used."""
    if not enabled():
        return None
    slots = slots_for(parallel)
    key = _key(task_path, backend, slots)
    with _lock:
        srv = _servers.get(key)
        if srv is not None and srv.alive:
            _servers[key] = _servers.pop(key)  # most recently used last
            return srv
        if srv is not None:
            if srv.owner == os.getpid():   # (a forked child leaves its parent's server alone)
                srv.close()
            del _servers[key]
        while len(_servers) >= MAX_SERVERS:
            old = _servers.pop(next(iter(_servers)))
            if old.owner == os.getpid():
                old.close()
        srv = _starter.submit(_start, key, task_path, backend, slots).result()
        _servers[key] = srv
        log.debug("judge_server_started", task=Path(task_path).name, slots=slots)
        return srv


def prestart(task_path: str, backend: Backend, parallel: int) -> None:
    """Start the task's judge server now (its start then overlaps the first rewrite); never raises."""
    try:
        server_for(task_path, backend, parallel)
    except Exception as exc:  # noqa: BLE001 - the first round starts one, or runs one-shot jobs
        log.info("judge_server_not_started", error=str(exc)[:200])


def request(srv: JobServer, job: dict[str, Any], key: str, timeout: float) -> JobResult:
    """One verification request: the candidates copied into the server's folder, their paths rewritten."""
    inbox = srv.scratch / f"request-{srv.requests + 1}"
    inbox.mkdir()
    try:
        cands = []
        for i, c in enumerate(job.get("candidates") or []):
            dest = inbox / f"c{i}_{Path(c['path']).name}"
            shutil.copyfile(c["path"], dest)
            cands.append({**c, "path": str(dest)})
        return srv.request({"job": {**job, "candidates": cands}, "seal_key": key}, timeout)
    finally:
        shutil.rmtree(inbox, ignore_errors=True)


def close_all() -> None:
    with _lock:
        while _servers:
            srv = _servers.popitem()[1]
            if srv.owner == os.getpid():
                srv.close()


def _forked() -> None:
    """In a forked child: the parent's servers, lock and starter thread are the parent's (a thread is not
    copied by fork: the child's starter would never run, and the lock may be held)."""
    global _lock, _starter
    _servers.clear()
    _lock = threading.Lock()
    _starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-judge-server")


atexit.register(close_all)
os.register_at_fork(after_in_child=_forked)
