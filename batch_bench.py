"""The benches a batch task runs beside and after its optimize run: the **final bench** (best vs initial, side by
side, no torch baselines) and the **baselines job** (torch eager and torch.compile beside the initial kernel, a child
of its own that starts once the run is triaged, or at its end: ``baselines_start``), with where the task's wall
time went (``TaskTiming``). Each runs as a ``python -m tritondx.batch_bench final-bench ...`` child where the task
is pinned to a GPU (its environment: that GPU and its lock folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

log = structlog.get_logger(__name__)

#: the error of a final bench stopped at the batch's deadline (``_Benches.final``): the task is reported with its
#: run's own side-by-side figure (``batch_summary.RUN_BENCH``)
FINAL_AT_DEADLINE = "final bench stopped at the batch's deadline"


def _final_bench(task: str, best_path: str | None, backend_name: str, rounds: int,
                 baselines: bool = False, timeout: float = 900) -> dict[str, Any] | None:
    """One side-by-side bench job of the batch: the initial kernel, the best one (when given) and, with
    ``baselines``, torch eager and torch.compile. The final bench after a run asks for no baselines (its
    torch.compile compile was 15-52 s per task on the H200); the baselines job (``BaselinesJob``) asks for
    them and times only the user's original task."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.timing import bench_variants
    backend = get_backend(backend_name)
    if not backend.can_time:
        return None
    variants = [{"id": "initial", "path": task}]
    if best_path and Path(best_path).exists():
        variants.append({"id": "best", "path": best_path})
    result, error, seconds = bench_variants(task, variants, backend, rounds=rounds, baselines=baselines,
                                            timeout=timeout)
    if result is None:
        return {"error": error, "seconds": seconds, "baselines": baselines}
    out: dict[str, Any] = {"seconds": seconds, "device_seconds": result.get("device_seconds"),
                           "baselines": baselines, "shapes": []}
    for e in result["shapes"]:
        out["shapes"].append({"shape": e["shape"], "dtype": e["dtype"], "floor_ms": e["floor_ms"],
                              **{vid: {"median_ms": v["median_ms"], "spread": v["spread"],
                                       "roofline_fraction": v["roofline_fraction"]}
                                 for vid, v in e["variants"].items()}, "errors": e["errors"]})
    return out


def _bench_cmd(task: str, best: str | None, backend_name: str, rounds: int, baselines: bool) -> list[str]:
    return [sys.executable, "-m", "tritondx.batch_bench", "final-bench", task, best or "", backend_name, str(rounds),
            *(["baselines"] if baselines else [])]


def _bench_answer(p: subprocess.CompletedProcess | subprocess.Popen, stdout: str, stderr: str
                  ) -> dict[str, Any] | None:
    """The JSON line a ``final-bench`` child printed, or an error record (redacted)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{") or ln == "null"]
    if p.returncode != 0 or not lines:
        from tritondx.tools.llm.redact import redact_text
        return {"error": redact_text(f"final bench exited with {p.returncode}: {stderr[-500:]}"), "seconds": 0.0}
    return json.loads(lines[-1])


def _final_bench_in_child(task: str, best: str | None, backend_name: str, rounds: int, env: dict[str, str],
                          baselines: bool = False, timeout: float | None = None) -> dict[str, Any] | None:
    """``_final_bench`` in a child process with the task's environment (its GPU and lock folder)."""
    from tritondx.tools.exec.sandbox import die_with_parent_fn
    t0 = time.monotonic()
    try:
        p = subprocess.run(_bench_cmd(task, best, backend_name, rounds, baselines), capture_output=True, text=True,
                           env=env, preexec_fn=die_with_parent_fn(), timeout=timeout)
    except subprocess.TimeoutExpired:   # ``_Benches.final`` names it the deadline's
        return {"error": f"timed out after {timeout:.0f} s", "seconds": round(time.monotonic() - t0, 3)}
    return _bench_answer(p, p.stdout, p.stderr)


class TaskTiming(BaseModel):
    """Where a task's wall time went in the batch (results.json ``timing``). The baselines job (torch eager
    and torch.compile beside the initial kernel) runs beside the optimize run (from its triage) or after it,
    beside the final bench (``baselines_start``); the task waits for it only when it is still going after
    both (``baselines_wait_s``)."""

    run_s: float = 0.0             #: the optimize (or resume) process
    final_bench_s: float = 0.0     #: best vs initial after the run (0: no final bench was needed)
    baselines_s: float = 0.0       #: the baselines job's wall seconds (its child process, start to exit)
    baselines_overlapped_s: float = 0.0  #: of those, seconds during which the run or the final bench went on
    baselines_wait_s: float = 0.0  #: seconds the task waited for it after its run and final bench
    #: seconds it went on after the task's end with the task's worker free for the next task (``BASELINES_DETACH_ENV``)
    baselines_after_s: float = 0.0
    baselines_stopped: str = ""    #: why it was stopped before it answered ("" when it answered)
    wall_s: float = 0.0            #: the task's wall seconds, the wait included
    #: ``wall_s`` less the wait: what the task would take if the baselines cost nothing (its CPU and device
    #: share during the run may still have slowed the run; not subtracted, not measurable from one batch)
    wall_without_baselines_s: float = 0.0


#: longest a baselines job waits for its run's triage before it starts anyway
BASELINES_MAX_DELAY_S = 180.0
#: when a task's baselines job starts: ``triaged`` (beside its run, once the probe is done) or ``end`` (after
#: the run, beside its final bench). Unset: ``baselines_start`` picks by the batch's load.
BASELINES_START_ENV = "TRITONDX_BASELINES_START"
#: host cores per concurrent task below which the baselines jobs wait for the runs' ends
CORES_PER_TASK_BESIDE = 8
#: "0": a task started its baselines job at its run's end (``end``) holds its worker until the job answers. Default:
#: the worker goes on to the next task and the job's answer is joined to the task's entry when it comes
#: (``PendingTask``). On the H200 corpus batches of 2026-12-04 (8 workers, ``cost_h200_20261204``) the tasks waited
#: 393-522 s in all for their baselines jobs after their runs, up to 173 s per task, with their workers idle.
BASELINES_DETACH_ENV = "TRITONDX_BASELINES_DETACH"


def baselines_start(concurrent: int) -> str:
    """``triaged`` where the host has cores to spare (at least ``CORES_PER_TASK_BESIDE`` per concurrent
    task), else ``end``: on the H200's 16 cores, 2 tasks with their baselines beside them waited 0 s for
    those (2026-12-02, call 3), while 8 tasks' torch.compile compiles beside their runs made the runs' screens
    2-3x slower (call 5: 66-133 s from rewrite to screened, 35-45 s for four of them without them the day
    before). ``TRITONDX_BASELINES_START`` overrides."""
    chosen = os.environ.get(BASELINES_START_ENV, "")
    if chosen in ("triaged", "end"):
        return chosen
    return "triaged" if max(1, concurrent) * CORES_PER_TASK_BESIDE <= (os.cpu_count() or 1) else "end"


def hw_initial_at(tasks_per_device: int) -> str:
    """When a run starts the initial kernel's half of the hardware check (``timing.HW_INITIAL_AT_ENV``): ``triage``
    (speculative, while the profiler is idle) for one task per device, ``contender`` (with the first would-be
    winner) where several tasks share one device's profiler lock. Why: in the H200 corpus batch of 2026-12-03
    (``bench/results/cost_h200_20261203d``, call 3: 8 tasks per GPU) the profiler lock was held 346 s of 400 s, and
    of 20 hardware-check processes about 16 were initial halves started in triage while only 4 tasks ever had a
    winner: some 12 sessions (median hold 6.5 s) served no check, in the batch's one serial resource. A speculative
    half yields to waiting urgent sessions but, once it holds the lock, finishes. ``TRITONDX_HW_INITIAL_AT``
    overrides."""
    from tritondx.tools.verify.timing import HW_INITIAL_AT_ENV
    chosen = os.environ.get(HW_INITIAL_AT_ENV, "")
    if chosen in ("triage", "contender"):
        return chosen
    return "triage" if tasks_per_device <= 1 else "contender"


# Baselines jobs are started from this one long-lived thread (a child dies with the thread that started it).
_LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-baselines")


def _triaged(log_file: Path) -> bool:
    """True once the run's log says it was triaged (its probe is done)."""
    try:
        return '"event": "triaged"' in log_file.read_text(errors="replace")
    except OSError:
        return False


class BaselinesJob:
    """The task's torch eager / torch.compile timing, in a job of its own beside the optimize run or its final bench.

    A ``final-bench ... baselines`` child process (the task's environment: its GPU and lock folder) whose
    sandboxed bench job runs only the user's original task: the initial kernel, its reference in eager mode
    and under torch.compile, side by side. Its compile (most of its 15-52 s on the H200) overlaps the run's
    phases or the final bench; its timing holds the device exclusively like every bench, so no measurement is disturbed. A child,
    not a thread, so that a failed run or the batch's deadline can stop it (its job dies with it)."""

    def __init__(self, task: str, backend_name: str, rounds: int, env: dict[str, str],
                 after: Path | None = None, max_delay_s: float = BASELINES_MAX_DELAY_S) -> None:
        """``after``: a run's log; the job starts once the run has been triaged there (or after
        ``max_delay_s``): at a batch's start every task's probe, judge server and warm runner start at
        once, and eight torch.compile compiles beside them made the probes 5x slower on the H200
        (2026-12-02: 50 s a task, 10 s the day before)."""
        self.cmd, self.env, self.task = _bench_cmd(task, None, backend_name, rounds, True), env, task
        self.t0 = time.monotonic()
        self.t_end: float | None = None
        # files, not pipes: nobody reads the child's output until the run ends, and a full pipe would stall it
        self.out, self.err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        self.proc: subprocess.Popen | None = None
        self.stopped = ""
        self._gate = threading.Lock()
        self._launched = threading.Event()
        self._waiter = threading.Thread(target=self._start_when_triaged, args=(after, max_delay_s), daemon=True)
        self._waiter.start()

    def _start_when_triaged(self, after: Path | None, max_delay_s: float) -> None:
        deadline = time.monotonic() + max_delay_s
        while after is not None and time.monotonic() < deadline and not self.stopped and not _triaged(after):
            time.sleep(0.5)
        # started from the one long-lived thread: the child dies with the thread that started it
        _LAUNCHER.submit(self._launch).result()
        if self.proc is not None:   # its own end, not when someone asks for its answer
            self.proc.wait()
            self.t_end = self.t_end or time.monotonic()

    def _launch(self) -> None:
        from tritondx.tools.exec.sandbox import die_with_parent_fn
        with self._gate:
            if not self.stopped:
                self.t0 = time.monotonic()
                self.proc = subprocess.Popen(self.cmd, stdout=self.out, stderr=self.err, text=True, env=self.env,
                                             preexec_fn=die_with_parent_fn())
                log.info("baselines_started", task=Path(self.task).stem, pid=self.proc.pid)
            self._launched.set()

    def result(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Wait for the job's answer (at most ``timeout`` seconds, then stop it)."""
        start = time.monotonic()
        if not self._launched.wait(timeout):
            return self.stop("stopped at the batch's deadline")
        try:
            self.proc.wait(timeout=None if timeout is None else max(0.0, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            return self.stop("stopped at the batch's deadline")
        self._waiter.join(5)   # it notes the job's end
        self.t_end = self.t_end or time.monotonic()
        return _bench_answer(self.proc, *self._output())

    def _output(self) -> tuple[str, str]:
        texts = []
        for f in (self.out, self.err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        return texts[0], texts[1]

    def stop(self, why: str) -> dict[str, Any]:
        """Stop the job (its sandboxed bench job ends with it; one not started yet never starts): its
        seconds so far are still reported."""
        with self._gate:
            self.stopped = why
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self._output()
        self.t_end = time.monotonic()
        log.info("baselines_stopped", pid=self.proc.pid if self.proc else None, why=why)
        return {"error": f"baselines job {why}", "seconds": round(self.t_end - self.t0, 3) if self.proc else 0.0}

    @property
    def seconds(self) -> float:
        return (self.t_end or time.monotonic()) - self.t0


def _task_timing(t0: float, run_s: float, final_s: float, wait_s: float, job: BaselinesJob | None,
                 t_end: float | None = None) -> TaskTiming:
    """``TaskTiming`` from what was measured directly: the run, the final bench(es), the wait for the job.
    ``t_end``: when a detached task ended (its worker went on); the job's seconds after it are ``baselines_after_s``."""
    wall = (t_end or time.monotonic()) - t0
    tm = TaskTiming(run_s=round(run_s, 3), final_bench_s=round(final_s, 3), wall_s=round(wall, 3),
                    baselines_wait_s=round(wait_s, 3), wall_without_baselines_s=round(wall - wait_s, 3))
    if job is not None:
        after = max(0.0, (job.t_end or time.monotonic()) - t_end) if t_end is not None else 0.0
        tm.baselines_s = round(job.seconds, 3)
        tm.baselines_after_s = round(min(after, job.seconds), 3)
        tm.baselines_overlapped_s = round(max(0.0, job.seconds - wait_s - after), 3)
        tm.baselines_stopped = job.stopped
    return tm


class _Benches:
    """The benches a task runs after its optimize run, with the seconds each kind cost it: the final bench
    (best vs initial, no torch baselines) and the wait for its baselines job."""

    def __init__(self, task: str, backend_name: str, rounds: int, env: dict[str, str], pinned: bool) -> None:
        self.task, self.backend_name, self.rounds, self.env, self.pinned = task, backend_name, rounds, env, pinned
        self.final_s = 0.0
        self.wait_s = 0.0

    def final(self, best: str | None, timeout: float | None = None) -> dict[str, Any] | None:
        """``timeout``: seconds to the batch's deadline (a final bench still going there is stopped and the task
        reported with the error, not lost with the batch's end); None: the bench's own limit."""
        t = time.monotonic()
        try:
            if self.pinned:  # the task's GPU: in a child process with the task's environment
                res = _final_bench_in_child(self.task, best, self.backend_name, self.rounds, self.env,
                                            timeout=timeout)
            else:
                res = _final_bench(self.task, best, self.backend_name, self.rounds,
                                   **({"timeout": timeout} if timeout is not None else {}))
            if timeout is not None and res is not None and "shapes" not in res and \
                    time.monotonic() - t >= timeout - 1.0:   # its job's own timeout: the deadline's, named so
                res = {**res, "error": f"{FINAL_AT_DEADLINE} ({timeout:.0f} s): {res.get('error', '')}"[:600]}
            return res
        finally:
            self.final_s += time.monotonic() - t

    def wait(self, how) -> dict[str, Any] | None:
        t = time.monotonic()
        try:
            return how()
        finally:
            self.wait_s += time.monotonic() - t


def _final_bench_main(argv: list[str]) -> int:
    task, best, backend_name, rounds, *flag = argv
    print(json.dumps(_final_bench(task, best or None, backend_name, int(rounds), baselines=flag == ["baselines"]),
                     default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (6, 7) and sys.argv[1] == "final-bench":
        sys.exit(_final_bench_main(sys.argv[2:]))
    sys.exit("usage: python -m tritondx.batch_bench final-bench TASK BEST BACKEND ROUNDS [baselines]")
