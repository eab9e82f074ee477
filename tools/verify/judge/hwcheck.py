"""The hardware check of a claimed speedup (job kind ``hwcheck``, trusted side, CUDA with ncu).

For the initial kernel and the best candidate in turn, a runner (``spawn.py``, the candidate in its
own sandboxed process) is started under Nsight Compute, outside the runner's namespaces, with
``--profile-from-start off``; the runner brackets each measured call with the CUDA profiler API, so
ncu reads the duration of every kernel those calls launch (``gpu__time_duration.sum``) from the
hardware. The calls run on one bench case (the job's ``shape`` and ``dtype``: the case with the largest claimed gain,
``timing.claim_case``; else the first bench shape) with inputs this job makes (a fresh seed per call), and
their outputs are compared with the reference here: a launcher that behaves differently under the
profiler still has to be right. ncu's answer goes to a log file in this job's folder. A runner under ncu
gets no namespaces of its own (ncu's injected threads make ``unshare`` of a user namespace fail), so it could
write that file by path and forge durations: known and open (tests/cpu/reliability/README.md); the check can
then only fail to reject a claim the bench job already measured with its own clock.

Each runner first imports torch and Triton and receives every call's inputs (kept in its host memory) outside the
profiler lock (``_profile``); the lock covers its hello (the candidate's import), its calls and its exit. Meanwhile a
runner of the same source, not under ncu, makes one call (``_Prewarm``, for a source that autotunes: ``_wants_prewarm``):
its compiles and autotuning results go to a cache folder the runner under ncu then starts from, so its warm-up call under
the lock finds them instead of benchmarking every config there. Each source has its own folder: the initial kernel's
runner never reads what a candidate's process wrote.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import structlog
import torch

from tritondx.tools.evidence.ncu import DRIVER_BUSY_RE, ncu_path, parse_raw_csv
from tritondx.tools.exec.gpulock import phase, profiler
from tritondx.tools.exec.triton_cache import prewarm_wanted
from tritondx.tools.task.module import as_tuple, load_module, norm_shape, tolerance, to_dtype
from tritondx.tools.verify.judge.compare import compare
from tritondx.tools.verify.timing import HW_UNAVAILABLE, NCU_MISSING
from tritondx.tools.verify.judge.spawn import RunnerDied, RunnerProcess, become_subreaper
from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.verify.judge.probe import device_phase

log = structlog.get_logger(__name__)

#: measured calls per variant (after one warm-up call that compiles and autotunes). ncu reads each kernel's
#: duration from the hardware, so a few calls suffice; each call's inputs and outputs cross the runner's pipes
#: under the profiler lock (a benchmark shape of the suite: 512 MiB each way), which every other task's check waits on
CALLS = 3
METRIC = "gpu__time_duration.sum"


def _ncu_cmd(exe: str, log_file: Path) -> list[str]:
    return [exe, "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
            "--metrics", METRIC, "--csv", "--page", "raw", "--log-file", str(log_file)]


def _ncu_failure(exc: RunnerDied, log_file: Path, label: str) -> Rejected:
    """ncu writes its own errors to the log file, not to the runner's stderr."""
    log = log_file.read_text(errors="replace").strip().splitlines() if log_file.exists() else []
    said = " | ".join(ln for ln in log if "==ERROR==" in ln or "==WARNING==" in ln)[-400:]
    return Rejected(exc.kind, f"{label} under ncu: {exc.message}" + (f"; ncu: {said}" if said else ""))


#: "0": a runner under ncu starts with the profiler lock held (as before 2026-12-02), not only from its hello. Named
#: ``TRITONDX_JOB_*`` so that it reaches the hwcheck job (``sandbox.scrubbed_env``); until 2026-12-03 it did not, and
#: the ncu_overlap "whole" runs of earlier sessions measured preloaded runners (their rows say ``preloaded``)
PRELOAD_ENV = "TRITONDX_JOB_NCU_PRELOAD"


def _start(exe: str, path: str, label: str, preload: bool = False,
           cache_dir: Path | None = None) -> tuple[RunnerProcess, Path]:
    """A runner of ``path`` under ncu and its log file; Rejected when it does not start. ``preload``: it has
    only imported torch and Triton (``RunnerProcess(preload=True)``); ``_hello`` sends the candidate. ``cache_dir``:
    its Triton cache (``_Prewarm``'s)."""
    log_file = _log_file(label)
    log_file.unlink(missing_ok=True)   # a retry's log is its own
    try:
        runner = RunnerProcess(path, "cuda", [], hide=[os.getcwd()], wrap=_ncu_cmd(exe, log_file), preload=preload,
                               cache_dir=cache_dir)
        if preload and not (runner.preloaded or {}).get("ok"):
            err = (runner.preloaded or {}).get("error", "no answer")
            runner.close()
            raise Rejected("import_error", f"{label}: importing torch and Triton under ncu failed: {err}")
    except RunnerDied as exc:
        raise _ncu_failure(exc, log_file, label) from None
    return runner, log_file


#: when a prewarm runner (``_Prewarm``) runs first: "auto" (default: for a source that autotunes, ``triton_cache.autotunes``),
#: "1" always, "0" never (the runner under ncu compiles and autotunes in its warm-up call, under the lock). A
#: ``TRITONDX_JOB_*`` name: it reaches the job.
PREWARM_ENV = "TRITONDX_JOB_HW_PREWARM"
def _wants_prewarm(path: str) -> bool:
    return prewarm_wanted(path, PREWARM_ENV)


class _Prewarm:
    """A runner of ``path`` that is not under ncu makes the warm-up call of ``inputs`` (compiles, autotunes) in a
    thread, with its Triton cache in a folder of its own that outlives it (``RunnerProcess(cache_dir=...)``); the
    runner under ncu starts from that folder. It decides nothing: a candidate that fails here is measured (and judged)
    under ncu all the same, which then compiles as it would have without it. ``seconds``: its wall; ``ok``: its call
    answered without an error."""

    def __init__(self, path: str, inputs: tuple, label: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"tritondx-prewarm-{label}-"))
        self.ok = False
        self.seconds = 0.0
        self.error = ""
        self._thread = threading.Thread(target=self._run, args=(path, inputs), name=f"tdx-prewarm-{label}",
                                        daemon=True)
        self._thread.start()

    def _run(self, path: str, inputs: tuple) -> None:
        t0 = time.monotonic()
        runner = None
        try:
            runner = RunnerProcess(path, "cuda", [], hide=[os.getcwd()], cache_dir=self.dir)
            if isinstance(runner.hello, dict) and runner.hello.get("ok"):
                # exclusive: the autotuning choice it leaves is the one measured under ncu (``bench.warmup_mode``);
                # its compiles give the device back (the runner's compile notes)
                with phase("exclusive"):
                    ans = runner.call(list(inputs), profile=False, inputs_back=False)
                self.ok = not (ans.get("diag") or {}).get("error")
                self.error = "" if self.ok else str((ans.get("diag") or {}).get("error"))[:200]
            else:
                self.error = str((runner.hello or {}).get("error"))[:200]
        except Exception as exc:  # noqa: BLE001 - it only saves time: the measurement goes on without it
            self.error = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            if runner is not None:
                runner.close()
            self.seconds = time.monotonic() - t0

    def wait(self) -> None:
        """Until the prewarm runner has ended (its compiles and autotuning choice are in ``dir`` then)."""
        self._thread.join()

    def remove(self) -> None:
        self._thread.join()
        shutil.rmtree(self.dir, ignore_errors=True)


def _hello(runner: RunnerProcess, log_file: Path, label: str) -> None:
    """The candidate's import in the runner (its first CUDA call may be there); Rejected when it fails."""
    try:
        hello = runner.begin()
    except RunnerDied as exc:
        raise _ncu_failure(exc, log_file, label) from None
    if not isinstance(hello, dict) or not hello.get("ok"):
        raise Rejected("import_error", f"{label}: importing failed: {(hello or {}).get('error')}")


def _log_file(label: str) -> Path:
    """Where ncu writes its answer for the runner of ``label`` (this job's folder)."""
    return Path(os.getcwd()) / f"ncu-{label}.csv"


def _driver_busy(log_file: Path) -> bool:
    return log_file.exists() and bool(DRIVER_BUSY_RE.search(log_file.read_text(errors="replace")))


def _profile(exe: str, path: str, cases: list[tuple[tuple, tuple]], atol: float, rtol: float, label: str,
             preload: bool, urgent: bool = True) -> tuple[Path, dict[str, float]]:
    """One runner of ``path`` under ncu over ``cases``; its log file and seconds (``start_s`` outside the
    lock, ``lock_s`` holding it). With ``preload`` the runner's Python, torch and Triton start before the
    profiler lock is taken and the lock is held from its hello (the candidate's import: its first CUDA
    call may be there) until it has ended; without, for its whole life. With ``preload`` a prewarm runner (``_Prewarm``)
    compiles and autotunes first, outside the lock (``prewarm_s``, ``prewarmed`` 1/0 among the seconds)."""
    t0 = time.monotonic()
    runner = log_file = None
    staged = False
    inside: dict[str, float] = {}   # the lock's seconds by part: what a batch's other checks queue on
    warm = _Prewarm(path, cases[0][0], label) if preload and _wants_prewarm(path) else None
    try:
        if preload:
            # imports torch and Triton beside the prewarm runner's call; reads its cache from the hello on
            runner, log_file = _start(exe, path, label, preload=True, cache_dir=warm.dir if warm else None)
            try:   # the calls' inputs cross the pipes now, not while every other ncu session waits for the lock
                for inputs, _ in cases:
                    runner.stage(list(inputs))
                staged = True
            except RunnerDied as exc:
                # no candidate code has run yet (it is imported at the hello): this tool's failure, never the
                # candidate's; measured the way it was before staging, its runner started under the lock
                runner.close()
                runner = None
                inside["stage_failed"] = 1.0
                log.warning("hwcheck_stage_failed", label=label, reason=exc.message[:200])
        if warm is not None:
            warm.wait()   # its compiles are in the folder before the hello under the lock
            inside["prewarm_s"], inside["prewarmed"] = warm.seconds, float(warm.ok)
    except BaseException:
        if warm is not None:
            warm.remove()
        raise
    t1 = time.monotonic()
    try:
        with profiler(urgent):
            t2 = time.monotonic()
            try:
                if runner is None:
                    runner, log_file = _start(exe, path, label, cache_dir=warm.dir if warm else None)
                _hello(runner, log_file, label)
                inside["hello_s"] = time.monotonic() - t2
                # the calls touch the device (shared: kernel durations, not wall time), past a queued timer: this
                # process holds the profiler lock every other ncu session of the batch waits on
                with device_phase("cuda", urgent=True):
                    _calls(runner, cases, atol, rtol, label, inside, staged)
            except RunnerDied as exc:
                raise _ncu_failure(exc, log_file, label) from None
            finally:
                if runner is not None:
                    t_exit = time.monotonic()
                    runner.close()
                    inside["exit_s"] = time.monotonic() - t_exit
                    runner = None
            t3 = time.monotonic()
    finally:
        if runner is not None:   # the lock was never taken (an exception while waiting for it)
            runner.close()
        if warm is not None:
            warm.remove()
    return log_file, {"start_s": round(t1 - t0, 3), "lock_wait_s": round(t2 - t1, 3), "lock_s": round(t3 - t2, 3),
                      **{k: round(v, 3) for k, v in inside.items()}}


def _measure(exe: str, path: str, cases: list[tuple[tuple, tuple]], atol: float, rtol: float,
             label: str, urgent: bool = True) -> dict[str, Any]:
    """ncu's kernel time per call of ``path`` over ``cases`` (inputs, reference), each call judged (``_profile``).
    A runner that lost the device's counters to another ncu session (``DRIVER_BUSY_RE``: a preloaded runner of
    another check whose process touched CUDA before its hello, or the hypothesis that ncu takes the counters
    at the first CUDA call and not at the start was wrong) is measured once more with the lock held for its
    whole life; a second failure stands (for the best kernel a rejection, as any failed measurement)."""
    preload = os.environ.get(PRELOAD_ENV, "1") != "0"
    calls = len(cases) - 1
    retried = None
    try:
        log_file, secs = _profile(exe, path, cases, atol, rtol, label, preload, urgent)
        rows = _rows(log_file)
        if not rows and _driver_busy(log_file):
            raise Rejected("hardware_check", f"{label}: ncu gave no kernel durations (driver resource unavailable)")
    except Rejected as exc:
        if not _driver_busy(_log_file(label)):
            raise
        retried = exc.reason[:300]
        log_file, secs = _profile(exe, path, cases, atol, rtol, label, preload=False, urgent=urgent)
        rows = _rows(log_file)
    if not rows:
        text = log_file.read_text(errors="replace") if log_file.exists() else ""
        tail = " | ".join(text.strip().splitlines()[-3:])[:300]
        raise Rejected("hardware_check", f"{label}: ncu gave no kernel durations ({tail or 'no output'})")
    total = sum(r.get("duration_ns") or 0.0 for r in rows)
    return {"ns_per_call": total / calls, "kernels": sorted({r["kernel"][:80] for r in rows}), "launches": len(rows),
            "seconds": secs, "preloaded": preload and retried is None,
            **({"retried_whole_life_lock": retried} if retried else {})}


def _rows(log_file: Path) -> list[dict]:
    return parse_raw_csv(log_file.read_text(errors="replace")) if log_file.exists() else []


def _calls(runner: RunnerProcess, cases: list[tuple[tuple, tuple]], atol: float, rtol: float, label: str,
           seconds: dict[str, float], staged: bool = False) -> None:
    """A warm-up call (compiles, autotunes: not profiled), then one profiled call per further case, judged;
    ``seconds`` gets ``warmup_s`` and ``calls_s``. ``staged``: the runner holds every case's inputs already
    (``RunnerProcess.stage``, in the order of ``cases``)."""
    def call(k: int, inputs: tuple, profile: bool) -> dict:
        if staged:
            return runner.call([], profile=profile, inputs_back=False, staged=k)
        return runner.call(list(inputs), profile=profile, inputs_back=False)

    t0 = time.monotonic()
    call(0, cases[0][0], False)
    seconds["warmup_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    for k, (inputs, refs) in enumerate(cases[1:]):
        ans = call(k + 1, inputs, True)
        diag = ans.get("diag") or {}
        if diag.get("error") or not isinstance(ans.get("outs"), list) or len(ans["outs"]) != len(refs):
            raise Rejected("hardware_check", f"{label}: call {k} under the profiler failed: "
                                             f"{diag.get('error', 'no outputs')}")
        for i, (o, r) in enumerate(zip(ans["outs"], refs)):
            bad = compare(o, r, atol, rtol) if isinstance(o, torch.Tensor) else {"reason": "not a tensor"}
            if bad:
                raise Rejected("hardware_check", f"{label}: output {i} under the profiler is wrong: "
                                                 f"{bad['reason']}")
    seconds["calls_s"] = time.monotonic() - t1




def hwcheck(job: dict[str, Any]) -> dict[str, Any]:
    exe = ncu_path()
    if exe is None:
        return {"ok": False, "note": f"{NCU_MISSING}: the speedup is not confirmed by hardware counters"}
    become_subreaper()
    orig = load_module(job["task"], "orig")
    # the bench case the claim is checked at (``timing.claim_case``: the one with the largest claimed gain), else the
    # first bench shape and dtype
    shape = norm_shape(job["shape"] if job.get("shape") is not None else orig.BENCH_SHAPES[0])
    dtype = to_dtype(job.get("dtype") or orig.DTYPES[0])
    atol, rtol = tolerance(orig, dtype)
    # fresh inputs for every call (the runner writes them into the same memory): an output
    # cached by address or by call count is stale, and judged so
    cases = []
    with device_phase("cuda"):
        for _ in range(int(job.get("calls", CALLS)) + 1):
            inputs = as_tuple(orig.make_inputs(shape, dtype, secrets.randbelow(1 << 30), "cuda"))
            refs = tuple(r.detach().cpu() for r in as_tuple(orig.reference(
                *[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])))
            cases.append((tuple(t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs), refs))
    out = {"ok": True, "shape": list(shape) if isinstance(shape, tuple) else shape, "dtype": str(dtype)}
    parts = job.get("measure") or ["initial", "best"]   # the orchestrator may measure the initial kernel earlier
    # One runner after the other, each under the profiler lock from its hello (the candidate's import,
    # where CUDA may start) until it has ended, its Python, torch and Triton start before the lock
    # (``_profile``: one ncu session at a time on the device; a second one starting while another profiles
    # fails both), and in a device phase only for its calls. The original first: its kernels are timed
    # before the candidate's process exists.
    if "initial" in parts:
        try:
            # speculative (triage's, before any round had a winner): behind every urgent ncu session
            out["initial"] = _measure(exe, job["task"], cases, atol, rtol, "initial",
                                      urgent=not job.get("speculative"))
        except Rejected as exc:
            # the initial kernel is the task's own: ncu failing on it is this tool's failure, not the
            # candidate's, and says nothing about the claim (seen on the H200: the runner under ncu died)
            return {"ok": False, "unavailable": True, "note": f"{HW_UNAVAILABLE}: {exc.reason}"[:400]}
    if "best" in parts:
        out["best"] = _measure(exe, job["candidate"], cases, atol, rtol, "best")
    return out
