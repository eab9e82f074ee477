"""The judge as a server (trusted side, inside a sandboxed job): one per task, answering every round's
verification (``worker --serve``, job kind ``judge``; started by ``verify/servers.py``).

What it keeps across requests, and why that is safe:
- this process with torch and Triton imported (and its CUDA context on a GPU), and the task's original
  loaded: only the judge's own code and the user's original task run here, as in a one-shot judge job;
  candidates never run in this process;
- the warm runners (``warm.RunnerPool``): they already serve many candidates one after the other, and
  clean up after each (``zygote.py``); one that ended is replaced before the next request.

What it removes after each request (what a one-shot judge job's end removed):
- every process left under it except the warm runners (it is the subreaper of the runners' trees);
- System V IPC objects (the job has its own IPC namespace wherever a server runs: a read-only sandbox);
- whatever was added during the request to the job's writable mounts (/tmp, /dev/shm, /run, its own
  folder: where a runner could write where it gets no namespaces of its own inside the job; under bubblewrap
  it gets them since 2026-12-02, ``spawn.NESTED_RUNNER_NAMESPACES``) (``zygote.Snapshots``, taken as the
  request starts); when something recorded there was changed or
  removed instead, it answers and ends (``ending``): the next request gets a fresh server;
- the request's tensors (device memory back to the driver's cache, then released).

Each request carries its own seal key (``seal.py``): a verdict of one request cannot be replayed for
another, and no key ever sits in this process's environment.
"""

from __future__ import annotations

import gc
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tritondx.tools.exec.sandbox import SANDBOXED_JOB_ENV

#: the job's own writable mounts whose content must not outlive a request
PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm", "/run")


class JudgeService:
    """``handle`` answers one request ``{"job": verify job with candidates, "seal_key": ...}``."""

    def __init__(self, job: dict[str, Any]) -> None:
        from tritondx.tools.verify.judge.warm import RunnerPool
        self.device, self.task = job["device"], job["task"]
        self.slots = max(1, int(job.get("slots") or 1))
        self.sandboxed = os.environ.get(SANDBOXED_JOB_ENV) == "1"
        # the warm runners start beside this process's imports (RunnerPool starts each in a thread of its own
        # that lives as long as the pool: they die with the thread that started them)
        self.starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-warm")
        self.pool_f = self.starter.submit(RunnerPool, self.device, [os.getcwd()], self.slots)
        from tritondx.tools.task.module import load_module
        from tritondx.tools.verify.judge.spawn import become_subreaper
        from tritondx.tools.verify.judge import job  # noqa: F401 - imported now, not in the first request
        become_subreaper()
        self.orig = load_module(self.task, "orig")
        self.snapshots = None
        self.served = 0

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        from tritondx.tools.exec.gpulock import usage
        from tritondx.tools.exec.worker import run
        from tritondx.tools.verify.judge.job import verify_round
        job, key = req["job"], str(req["seal_key"])
        if job.get("task") != self.task:
            return {"result": {"passed": False, "class": "error", "error": "a request for another task"}}
        pool = self.pool_f.result()
        if self.sandboxed:   # what the job's writable mounts hold before this request: the state to keep
            from tritondx.tools.verify.runner.zygote import Snapshots
            self.snapshots = Snapshots([*PRIVATE_MOUNTS, os.getcwd()])
        pool.snap()   # before any child of this request (zygote.py: shared mounts)
        u0 = usage()
        result = run(job, fn=lambda j: verify_round(j, key, pool=pool, orig=self.orig))
        u1 = usage()
        result["device_usage"] = {k: round(u1[k] - u0.get(k, 0.0), 4) for k in u1}
        result["served"] = self.served = self.served + 1
        result["server_pid"] = os.getpid()
        ending = self._clean(pool)
        return {"result": result, **({"ending": ending} if ending else {})}

    def _clean(self, pool) -> str:
        """Remove what the request left (module docstring); a reason to end when that is not possible."""
        from tritondx.tools.verify.runner import zygote
        gc.collect()
        if self.device.startswith("cuda"):
            import torch
            torch.cuda.empty_cache()
        zygote._kill_leftovers(keep=frozenset(z.proc.proc.pid for z in pool.free))
        if self.sandboxed:
            zygote._remove_sysv_ipc()
            if self.snapshots is not None and not self.snapshots.restore():
                return "a file this server had before a request was changed or removed during it"
        pool.refill()   # a warm runner that ended: a new one
        return ""

