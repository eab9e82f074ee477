"""Headless batch: optimize every task in a folder, resumably, and report like the paper.

Each task runs as its own ``tritondx optimize`` process (its own run folder and checkpoint
database), several at once; on a GPU, timing holds the device exclusively (tools/exec/gpulock.py) so
concurrent tasks never disturb a measurement. ``results.json`` is rewritten atomically after every
task: a batch killed at any point (even kill -9) resumes without redoing a finished task.
On a backend that times, each task's **baselines job** (torch eager and torch.compile beside the initial
kernel, side by side) runs beside its optimize run where the host has cores to spare (``baselines_start``),
so torch.compile's compile (15-52 s per task on the H200) is off the task's critical path, else after the
run beside its final bench; the **final bench** times the best kernel against the initial one, side by
side, without torch baselines. Speedups come from the final bench;
best vs torch is derived through the initial kernel (``derived_vs_torch``) and labelled so
(``measured_how``); ``timing`` says how much of the baselines job overlapped the run and how long the task
waited for it.

Scale:

- several local GPUs (backend cuda, N > 1 visible: ``$CUDA_VISIBLE_DEVICES`` or ``nvidia-smi -L``): each
  task process is pinned to one GPU (``CUDA_VISIBLE_DEVICES=<id>``) with that GPU's own lock folder
  (``<out>/locks/gpu<id>``), ``--workers`` tasks at once per GPU; a task takes whichever GPU frees up
  first. One GPU (or none) behaves as before: ``--workers`` tasks at once, one lock folder.
  ``TRITONDX_FAKE_GPUS=N`` pretends N GPUs for tests (any backend).
- ``--ray-address ADDR|auto|local``: one Ray task per kernel task (``num_gpus=1/workers`` on cuda, 0
  otherwise), the same task process run inside it; the driver writes ``results.json`` as each one
  finishes, so a killed batch resumes exactly like a local one. Run folders are written where the
  Ray task runs: give ``--out`` on a filesystem every node shares (and/or ``--checkpoint-url``).
- ``--checkpoint-url postgresql://...``: every task's checkpoints in that database (``checkpoints.py``);
  the URL reaches task processes through the environment, never their command line.

This module is the entry (``run_batch``, the ``tritondx batch`` command); beside it: ``batch_task`` (one task: its
optimize process and its entry), ``batch_bench`` (its final bench and baselines job, ``TaskTiming``),
``batch_summary`` (``results.json``, ``summary.md``, the aggregate), ``batch_scale`` (GPUs, slots, Ray) and
``batch_progress`` (the bar or the lines on stderr).
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from tritondx.batch_bench import BASELINES_DETACH_ENV, BASELINES_START_ENV, baselines_start, hw_initial_at
from tritondx.batch_progress import BatchProgress
from tritondx.batch_scale import _run_ray, plan_slots, visible_gpus
from tritondx.batch_summary import write_summary
from tritondx.batch_task import PendingTask, run_one


def run_batch(*args, **kwargs) -> dict[str, Any]:
    """Run every task of a folder (see ``_run_batch``). The device-lock folder the batch sets for its
    own final benches is put back afterwards, so a later batch in the same process starts clean."""
    before = os.environ.get("TRITONDX_LOCK_DIR")
    try:
        return _run_batch(*args, **kwargs)
    finally:
        if before is None:
            os.environ.pop("TRITONDX_LOCK_DIR", None)
        else:
            os.environ["TRITONDX_LOCK_DIR"] = before


#: what makes a task's run long, read from its source: a ``tl.dot`` kernel compiles slowly and its tiles make a wide
#: search (H200 corpus batch of 2026-12-05: the six with ``tl.dot`` took 117-449 s of run and final bench, the median
#: task 112 s), and an autotuner times each of its configs in every job that calls it (36 configs: 449 s)
DOT_RE = re.compile(r"\btl\.dot\(")                 # e.g. "acc += tl.dot(a, b)"
AUTOTUNE_CONFIG_RE = re.compile(r"\btriton\.Config\(")   # e.g. "triton.Config({'BLOCK': 64}, num_warps=4),"


def expected_cost(path: str) -> float:
    """A task's expected run time relative to a plain one (1.0), from its source; 1.0 where it cannot be read."""
    try:
        src = Path(path).read_text(errors="replace")
    except OSError:
        return 1.0
    return 1.0 + (1.0 if DOT_RE.search(src) else 0.0) + len(AUTOTUNE_CONFIG_RE.findall(src)) / 12


def shuffled(tasks: list[str]) -> list[str]:
    """A fixed pseudo-random order (a batch cut short by a deadline is still a fair sample), the costly tasks first
    (``expected_cost``: longest first keeps one from starting late and holding the batch's end)."""
    import hashlib
    out = sorted(tasks, key=lambda t: hashlib.sha256(Path(t).stem.encode()).hexdigest())
    return sorted(out, key=lambda t: -expected_cost(t))


def _run_batch(folder: str, out: str, backend: str = "auto", workers: int = 1, extra_args: list[str] | None = None,
               final_rounds: int = 3, progress: bool = True, only: list[str] | None = None,
               deadline_s: float | None = None, shuffle: bool = False, ray_address: str | None = None,
               checkpoint_url: str | None = None) -> dict[str, Any]:
    from tritondx.tools.backends.registry import get_backend
    tasks = sorted(str(p.resolve()) for p in Path(folder).glob("*.py") if not p.name.startswith("_"))
    if only:
        tasks = [t for t in tasks if Path(t).stem in only]
    if shuffle:
        tasks = shuffled(tasks)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    res_file = out_dir / "results.json"
    previous = json.loads(res_file.read_text())["results"] if res_file.exists() else []
    done = {r["task"]: r for r in previous if r.get("status") == "done"}
    results = list(done.values())
    todo = [t for t in tasks if Path(t).stem not in done]
    be = get_backend(backend)
    env_extra: dict[str, str] = {}
    if checkpoint_url:
        from tritondx.checkpoints import URL_ENV, check_url
        env_extra[URL_ENV] = check_url(checkpoint_url) or ""
    gpus = [] if ray_address else visible_gpus(be.name)
    slots = plan_slots(gpus, workers, out_dir)
    env_extra[BASELINES_START_ENV] = baselines_start(len(slots))
    detach = env_extra[BASELINES_START_ENV] == "end" and os.environ.get(BASELINES_DETACH_ENV, "1") != "0"
    from tritondx.tools.verify.timing import HW_INITIAL_AT_ENV
    env_extra[HW_INITIAL_AT_ENV] = hw_initial_at(max(1, workers))   # tasks per device (Ray: num_gpus=1/workers)
    meta = {"suite": folder, "backend": be.name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": sys.version.split()[0], "workers": max(1, workers),
            "baselines_start": env_extra[BASELINES_START_ENV], "hw_initial_at": env_extra[HW_INITIAL_AT_ENV],
            "baselines_detached": detach and not ray_address}
    if len(gpus) > 1:
        meta["gpus"] = gpus
    if ray_address:
        meta["ray"] = "local" if ray_address == "local" else "cluster"
    try:
        import torch
        import triton
        meta.update({"torch": torch.__version__, "triton": triton.__version__,
                     "device": be.describe() + (f" x{len(gpus)}" if len(gpus) > 1 else "")})
    except Exception:  # metadata only
        pass
    lock = threading.Lock()
    # this process's final benches take the lock too; a caller's folder is kept (shared with its other work)
    os.environ["TRITONDX_LOCK_DIR"] = os.environ.get("TRITONDX_LOCK_DIR") or str(out_dir / ".locks")
    start = time.time()
    not_after = start + deadline_s if deadline_s else None

    bar = BatchProgress(len(tasks), len(done), out_dir) if progress else None

    def on_result(entry: dict[str, Any]) -> None:
        with lock:
            if entry["status"] != "skipped":
                results.append(entry)
                write_summary(out_dir, results, meta)
        if bar:
            bar.finished(entry)

    from tritondx.tools.exec.held_sampler import HeldSampler
    from tritondx.tools.run.host import HostCpu
    sampler = HeldSampler([s["TRITONDX_LOCK_DIR"] for s in slots] if not ray_address else [])
    sampler.__enter__()
    host = HostCpu().start() if not ray_address else None   # a Ray cluster's hosts are not this one

    def held_meta() -> None:
        if sampler.folders:
            meta["device_held"] = sampler.summary()
        if host is not None:
            meta["host_cpu"] = host.summary()

    def on_result_held(entry: dict[str, Any]) -> None:
        held_meta()
        on_result(entry)

    try:
        if ray_address:
            _run_ray(todo, ray_address, be.name, workers, out_dir, extra_args, final_rounds, env_extra, not_after,
                     on_result_held)
        else:
            free: queue.Queue[dict[str, str]] = queue.Queue()
            for s in slots:
                free.put(s)

            def one(task: str) -> "dict[str, Any] | PendingTask":
                slot = free.get()  # never waits long: the pool has exactly one thread per slot
                if bar:
                    bar.started(Path(task).stem)
                try:
                    return run_one(task, str(out_dir / "runs" / Path(task).stem), be.name, extra_args,
                                   final_rounds, {**slot, **env_extra}, not_after, detach=detach)
                finally:
                    free.put(slot)

            # a detached task's baselines job is waited for on a thread of its own (``PendingTask``)
            pool = ThreadPoolExecutor(max_workers=len(slots))
            waiters = ThreadPoolExecutor(max_workers=max(1, len(todo)), thread_name_prefix="tdx-pending")
            stopped = False
            try:
                running = {pool.submit(one, t) for t in todo}
                while running:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        got = fut.result()
                        if isinstance(got, PendingTask):
                            running.add(waiters.submit(got.finish))
                        else:
                            on_result_held(got)
            except BaseException:  # Ctrl-C, SIGTERM: not held up by the runs still going (they die with us;
                stopped = True     # their checkpoints stay, and the next batch on this folder resumes them)
                raise
            finally:
                for ex in (pool, waiters):
                    ex.shutdown(wait=not stopped, cancel_futures=stopped)
    finally:
        sampler.__exit__(None, None, None)
        held_meta()
        if bar:
            bar.close()
    return write_summary(out_dir, results, meta)
