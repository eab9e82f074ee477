"""A long-lived sandboxed job that answers a stream of requests (``worker --serve``): the streaming
counterpart of ``sandbox.run_job``.

One server is started exactly as a job is (``sandbox.prepare`` and ``sandbox.start``: the same sandbox,
scrubbed environment, scratch folder, memory limit, lifeline, device-lock descriptors), so what it can
reach is what one job can reach. It then reads requests (one JSON line each) on a pipe of its own and answers each on
another; everything it prints goes to a host file outside its view. A request that takes longer than
its timeout, or a server that dies, ends the server: that request's answer is a ``JobResult`` classified
as ``run_job`` classifies a job (timeout, out of memory, segfault, ...), and the caller starts a new one
for the next request. What a request may leave behind in the server, and what the server removes
between requests, is the worker's business (``worker.serve``).

Why: each job is a Python start that imports torch (and a CUDA context on a GPU): 3-7 s on a loaded
machine, paid by every judge job of every round. A server pays it once per task.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from contextlib import ExitStack
from typing import Any

import structlog

from tritondx.tools.exec.sandbox import JobResult, _kill_group, _one_line, bwrap_returncode, classify, prepare, start

log = structlog.get_logger(__name__)

#: "READ_FD,WRITE_FD" in a server's environment: where its requests come from and its answers go
SERVE_FDS_ENV = "TRITONDX_SERVE_FDS"
#: most bytes of one answer line (a round's sealed verdicts with every check record: well under this)
MAX_ANSWER = 256 << 20


class ServerDied(Exception):
    """The server is gone (it ended, timed out or was closed): start another."""


class JobServer:
    """A started server job. ``request`` sends one request and waits for its answer."""

    def __init__(self, job: dict[str, Any], python: str | None = None, env: dict[str, str] | None = None,
                 memory_bytes: int | None = None, gpu_lock: bool = False) -> None:
        self.kind = str(job.get("kind"))
        self.owner = os.getpid()   # a forked copy of this object must not speak on its pipes
        self._stack = ExitStack()
        lock_fds: tuple[int, ...] = ()
        lock_env: dict[str, str] = {}
        if gpu_lock:
            from tritondx.tools.exec.gpulock import job_lock_fds
            lock_fds, lock_env = self._stack.enter_context(job_lock_fds())
        req_r, self._req_w = os.pipe()
        self._ans_r, ans_w = os.pipe()
        launch = prepare(job, ["--serve", "job.json"], python, {**(env or {}), **lock_env})
        self.scratch, self.iso = launch.scratch, launch.iso
        launch.env[SERVE_FDS_ENV] = f"{req_r},{ans_w}"
        # its output: a host file no job can see (an unlinked temporary file)
        self._out = tempfile.TemporaryFile()
        self.started = time.monotonic()
        self.proc = start(launch, self._out, self._out, (req_r, ans_w, *lock_fds), memory_bytes)
        os.close(req_r)
        os.close(ans_w)
        self._buf = b""
        self.requests = 0
        self.dead: JobResult | None = None

    @property
    def alive(self) -> bool:
        return self.dead is None and self.owner == os.getpid() and self.proc.poll() is None

    def request(self, msg: dict[str, Any], timeout: float) -> JobResult:
        """Send ``msg``; its answer as a ``JobResult`` (``result``: what the server answered). Never raises
        for anything the server does: a server that died or timed out is ended and its JobResult says why."""
        if self.dead is not None:
            return self.dead
        start = time.monotonic()
        try:
            os.write(self._req_w, (json.dumps(msg) + "\n").encode())
        except OSError:
            return self._ended(start, timed_out=False)
        deadline = start + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._ended(start, timed_out=True)
            ready, _, _ = select.select([self._ans_r], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    return self._ended(start, timed_out=False)
                continue
            chunk = os.read(self._ans_r, 1 << 20)
            if not chunk:
                return self._ended(start, timed_out=False)
            self._buf += chunk
            if len(self._buf) > MAX_ANSWER:
                return self._ended(start, timed_out=False, why="an answer larger than the server may send")
        line, self._buf = self._buf.split(b"\n", 1)
        self.requests += 1
        seconds = time.monotonic() - start
        try:
            answer = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._ended(start, timed_out=False, why="an answer that is not JSON")
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict):
            return self._ended(start, timed_out=False, why="an answer without a result")
        if answer.get("ending"):  # it answered, then ends (it could not clean up after this request)
            log.info("job_server_ending", kind=self.kind, why=str(answer.get("ending"))[:200])
            self.close()
        return JobResult(kind="ok", returncode=None, seconds=seconds, result=result)

    def _tail(self) -> str:
        try:
            self._out.seek(0, os.SEEK_END)
            size = self._out.tell()
            self._out.seek(max(0, size - 8000))
            return self._out.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def _ended(self, start: float, timed_out: bool, why: str = "") -> JobResult:
        """The server is finished: kill it, classify how it ended (as ``run_job`` does)."""
        if timed_out or why:
            _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc.pid)
            self.proc.wait()
        returncode = bwrap_returncode(self.iso, self.proc.returncode)
        stderr = self._tail()
        kind = "no_result" if why else classify(returncode, stderr, timed_out)
        if kind == "ok":   # it exited cleanly without answering
            kind = "no_result"
        message = (f"no_result: the server sent {why}" if why else
                   f"no_result: the job exited (code {returncode}) without writing a result "
                   "(os._exit() or sys.exit() in task code?)" if kind == "no_result"
                   else _one_line(kind, stderr, 0))
        if kind == "timeout":
            message = "the request did not finish within its time and the job was killed"
        self.dead = JobResult(kind=kind, returncode=returncode, seconds=time.monotonic() - start, message=message,
                              stderr_tail=stderr[-4000:])
        log.info("job_server_died", kind=self.kind, outcome=kind, requests=self.requests)
        self._release()
        return self.dead

    def close(self) -> None:
        """End the server (its pipe closes: it exits; killed if it does not within 5 s)."""
        if self.dead is None:
            self.dead = JobResult(kind="no_result", returncode=None, seconds=0.0, message="the server was closed")
        try:
            os.close(self._req_w)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._release()

    def _release(self) -> None:
        for fd in (self._req_w, self._ans_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._ans_r = -1
        self._stack.close()
        try:
            self._out.close()
        except OSError:
            pass
        import shutil
        shutil.rmtree(self.scratch, ignore_errors=True)
