"""One task of a batch: its ``tritondx optimize`` process (or the resume of what a killed batch left), its
benches (``batch_bench``) and its ``results.json`` entry (``batch_summary``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tritondx.batch_bench import BASELINES_START_ENV, BaselinesJob, TaskTiming, _Benches, _task_timing
from tritondx.batch_summary import summarize_task
from tritondx.tools.run.phases import PHASE

#: seconds before the batch's deadline a run ends by (``TRITONDX_FINISH_BY``): its final bench (best vs initial,
#: 20-40 s on the H100 corpus batches of 2026-12-05) still fits
FINAL_RESERVE_S = 40.0
#: the final bench re-times best vs initial only where the run's own side-by-side figure is under this. Picking the
#: best of a few candidates, each timed with a 2-6% spread, lifts the winner's figure by a few percent (the winner's
#: curse), never by this much; above it the final bench repeats what the run measured. H100 corpus batch of
#: 2026-12-05 (``bench/results/corpus_h100_20261205c/batch_f``): 18 final benches of 16-41 s each (552 s, ~2 s of
#: device each) came within 1.1% of their runs' figures; the five under 1.15x came 0.3-0.9% lower, the 13 over
#: it -1.1% to +1.1%.
RECHECK_BELOW = 1.15


def _earlier_run(run_dir: Path, checkpoint_url: str | None = None) -> str | None:
    """What a previous, killed batch left in ``run_dir``: "finished" (report written), "interrupted"
    (checkpoints to resume from) or None (nothing usable)."""
    if (run_dir / "report.json").exists():
        return "finished"
    from tritondx.checkpoints import MARKER_FILE, count_checkpoints
    n = count_checkpoints(run_dir, checkpoint_url)
    if n is None and (run_dir / MARKER_FILE).exists() and (run_dir / "run.json").exists():
        # checkpoints in PostgreSQL that cannot be read right now (server down, no password): never wipe
        # the folder; `resume` says what is wrong and a later batch tries again
        return "interrupted"
    return "interrupted" if n else None


class PendingTask:
    """A task whose run and final bench are done while its baselines job still runs: its worker is free for the next
    task, and ``finish()`` (called by the batch on a thread of its own) waits for the job and returns the task's
    results.json entry. Its ``wall_s`` ends where the task ended, not where the job did (``baselines_after_s``)."""

    def __init__(self, task: str, finish) -> None:
        self.task = task
        self.finish = finish


def _optimize(task: str, run_path: Path, backend_name: str, extra_args: list[str] | None, env: dict[str, str],
              not_after: float | None) -> subprocess.CompletedProcess | None:
    """The task's ``tritondx optimize`` process (or resume/keep what a killed batch left in ``run_path``);
    None when it was stopped at the batch's deadline."""
    from tritondx.tools.exec.sandbox import die_with_parent_fn  # imported here, never inside the forked child
    cmd = [sys.executable, "-m", "tritondx.cli", "optimize", task, "--backend", backend_name, "--out",
           str(run_path), *(extra_args or [])]
    earlier = _earlier_run(run_path, env.get("TRITONDX_CHECKPOINT_URL") or None)
    if earlier == "finished":  # the batch died after the run, before results.json: keep the run
        return subprocess.CompletedProcess(cmd, 0, "", "")
    if earlier == "interrupted":  # the batch died during the run: continue it from its checkpoint
        cmd = [sys.executable, "-m", "tritondx.cli", "resume", str(run_path)]
    elif run_path.exists():  # a run that died before its first checkpoint: nothing to keep
        shutil.rmtree(run_path)
    # The child dies with this process (kill -9 included), so a resumed batch never races an
    # orphaned run on the same folder. At the batch's deadline a run still going is stopped: its
    # checkpoints stay, and the next batch on this folder (or `tritondx resume`) continues it.
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=die_with_parent_fn(),
                              timeout=max(1.0, not_after - time.time()) if not_after else None)
    except subprocess.TimeoutExpired:
        return None


def _best_path(run_path: Path, task: str) -> str | None:
    """The run's best kernel file, or None when the best is the initial kernel (or there is no report). The
    report names the run folder's copy of the task (``task_initial.py``) when no candidate won: that is the
    initial kernel too (a final bench of it beside itself cost 40-46 s per such task in the H200 corpus batch of
    2026-12-03 and reported a 0.95x "speedup" for an unchanged kernel)."""
    rep = run_path / "report.json"
    if not rep.exists():
        return None
    rec = json.loads(rep.read_text()).get("best") or {}
    best = rec.get("path")
    if not best or rec.get("id") == "initial" or not Path(best).exists() or Path(best).resolve() == Path(task).resolve():
        return None
    if Path(task).exists() and Path(best).read_bytes() == Path(task).read_bytes():
        return None
    return best


def _decisive(run_path: Path) -> float | None:
    """The run's best-vs-initial figure where it needs no re-timing: measured side by side in the run's bench and at
    least ``RECHECK_BELOW``."""
    rep = run_path / "report.json"
    if not rep.exists():
        return None
    r = json.loads(rep.read_text())
    sp = r.get("speedup")
    ok = r.get("speed") == "measured" and (r.get("best") or {}).get("measured") is not False
    return sp if ok and isinstance(sp, (int, float)) and sp >= RECHECK_BELOW else None


def run_one(task: str, run_dir: str, backend_name: str, extra_args: list[str] | None, final_rounds: int,
            env_extra: dict[str, str], not_after: float | None = None, detach: bool = False
            ) -> "dict[str, Any] | PendingTask":
    """Optimize one task in its own process, with its baselines job (torch eager, torch.compile) beside it on
    a backend that times; after the run a final bench times the best kernel against the initial one (no
    torch.compile there); returns its results.json entry. ``env_extra`` goes over this process's environment
    for all of them (GPU pinning, lock folder, checkpoint URL). ``detach``: a baselines job started at the run's
    end is not waited for here: a ``PendingTask`` comes back instead, whose ``finish()`` waits for it."""
    run_path = Path(run_dir)
    name = Path(task).stem
    if not_after and time.time() > not_after:
        return {"task": name, "path": task, "status": "skipped", "exit": None, "wall_s": 0.0}
    t0 = time.monotonic()
    env = {**os.environ, **env_extra}
    if not_after:   # the run ends in time for its final bench (``RunConfig.finish_by``)
        env["TRITONDX_FINISH_BY"] = f"{not_after - FINAL_RESERVE_S:.3f}"
    from tritondx.tools.backends.registry import get_backend
    timed = get_backend(backend_name).can_time
    beside = env.get(BASELINES_START_ENV, "triaged") != "end"
    job = BaselinesJob(task, backend_name, final_rounds, env, after=run_path / "log.jsonl") if timed and beside else None
    p = _optimize(task, run_path, backend_name, extra_args, env, not_after)
    t_run = time.monotonic()
    if timed and not beside and p is not None and p.returncode == 0:   # after the run, beside its final bench
        job = BaselinesJob(task, backend_name, final_rounds, env)
    if p is None:
        entry = {"task": name, "path": task, "status": "not_finished", "exit": None, "wall_s": t_run - t0,
                 "stderr_tail": f"stopped at the batch's deadline; `tritondx resume {run_path}` continues it"}
        if job:  # its seconds so far are reported, never dropped
            t = time.monotonic()
            entry["cost"] = {PHASE + "baselines": job.stop("stopped at the batch's deadline")["seconds"]}
            entry["timing"] = _task_timing(t0, t_run - t0, 0.0, time.monotonic() - t, job).model_dump()
        return entry
    bench = _Benches(task, backend_name, final_rounds, env, pinned="CUDA_VISIBLE_DEVICES" in env_extra)
    final = base = None
    if p.returncode != 0 and job:
        base = bench.wait(lambda: job.stop("stopped: the run failed"))
    elif job:
        best = _best_path(run_path, task)
        left = max(1.0, not_after - time.time()) if not_after else None
        decisive = _decisive(run_path)
        if best and decisive:   # the run's own side-by-side figure stands (``RECHECK_BELOW``)
            final = {"seconds": 0.0, "skipped": f"the run's bench measured {decisive:.2f}x, over {RECHECK_BELOW}x"}
        elif best:  # best vs initial side by side; no best: the baselines job's initial timing is the answer
            final = bench.final(best, timeout=left)
        t_end = time.monotonic()

        def conclude(final=final) -> dict[str, Any]:
            base = bench.wait(lambda: job.result(timeout=max(1.0, not_after - time.time()) if not_after else None))
            if not best and not (base and "shapes" in base):  # the initial kernel untimed: time it alone now
                final = bench.final(None, timeout=max(1.0, not_after - time.time()) if not_after else None)
            detached = t_end if detach and not beside else None
            timing = _task_timing(t0, t_run - t0, bench.final_s, 0.0 if detached else bench.wait_s, job, detached)
            return _entry(task, run_path, p, final, base, timing, env_extra)

        if detach and not beside:
            return PendingTask(name, conclude)
        return conclude()
    timing = _task_timing(t0, t_run - t0, bench.final_s, bench.wait_s, job) if job else None
    return _entry(task, run_path, p, final, base, timing, env_extra, t0)


def _entry(task: str, run_path: Path, p: subprocess.CompletedProcess, final: dict[str, Any] | None,
           base: dict[str, Any] | None, timing: TaskTiming | None, env_extra: dict[str, str],
           t0: float | None = None) -> dict[str, Any]:
    entry = summarize_task(task, run_path, p.returncode, timing.wall_s if timing else time.monotonic() - t0,
                           final, p.stderr, base, timing)
    if env_extra.get("CUDA_VISIBLE_DEVICES"):
        entry["gpu"] = env_extra["CUDA_VISIBLE_DEVICES"]
    return entry
