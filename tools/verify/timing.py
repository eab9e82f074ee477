"""Orchestrator side of timing: the bench job of a task's variants (``tools/bench/bench.py``)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from tritondx.tools.exec import triton_cache
from tritondx.tools.backends.base import Backend
from tritondx.tools.exec.jobs import job_error, run_device_job
from tritondx.tools.records.verify import HardwareCheck
from tritondx.tools.records.run import Verification

log = structlog.get_logger(__name__)

CEILINGS_FILE = Path(os.environ.get("TRITONDX_CACHE", Path.home() / ".cache" / "tritondx")) / "ceilings.json"


def bench_variants(task_path: str, variants: list[dict[str, str]], backend: Backend, rounds: int = 5,
                   baselines: bool = False, timeout: float = 900) -> tuple[dict[str, Any] | None, str, float]:
    """Time the variants side by side. Returns (result, error, seconds): the job's wall seconds;
    ``result["device_seconds"]`` is how long its job(s) held the device."""
    if not backend.can_time:
        return None, f"speed not measured: backend {backend.name} cannot time kernels", 0.0
    job = {"kind": "bench", "task": str(Path(task_path).resolve()),
           "variants": [{"id": v["id"], "path": str(Path(v["path"]).resolve())} for v in variants],
           "rounds": rounds, "baselines": baselines, "ceilings_file": str(CEILINGS_FILE)}
    extra = triton_cache.reader_env(Path(task_path).read_text()) if triton_cache.enabled() else {}
    r, seconds, device_s = run_device_job(job, backend, timeout, extra_env=extra)
    if r.ok and r.result and "shapes" in r.result:
        return {**r.result, "device_seconds": round(device_s, 4)}, "", seconds
    klass, reason = job_error(r)
    return None, f"{klass}: {reason}", seconds


# e.g. "timing_tampering: variant r1c3 replaced torch.Tensor.zero_ while it was timed"
TAMPER_RE = re.compile(r"timing_tampering: variant (\S+) replaced")


class TimedRound(BaseModel):
    """One round's bench: the result (None when it failed), the candidates still standing, those it
    rejected (as verification records), and the seconds it cost."""

    result: dict[str, Any] | None = None
    error: str = ""
    variants: list[dict[str, str]] = []
    survivors: list[str] = []
    rejected: list[dict[str, Any]] = []
    seconds: float = 0.0
    device_seconds: float = 0.0


def time_round(task_path: str, best: dict, passed: list[dict], backend: Backend, rounds: int,
               timeout: float) -> TimedRound:
    """Time the initial kernel, the previous best and the passed candidates side by side. A variant
    the bench job names for replacing a timing function is rejected and the rest timed again."""
    variants = [{"id": "initial", "path": task_path}]
    if best.get("id") not in (None, "initial"):
        variants.append({"id": best["id"], "path": best["path"]})
    variants += [{"id": c["id"], "path": c["path"]} for c in passed]
    out = TimedRound(variants=variants, survivors=[c["id"] for c in passed])
    result, error, seconds = bench_variants(task_path, variants, backend, rounds=rounds, timeout=timeout)
    out.seconds += seconds
    out.device_seconds += (result or {}).get("device_seconds", 0.0)
    cheat = TAMPER_RE.match(error or "")
    if result is None and cheat and cheat.group(1) in out.survivors:
        bad = cheat.group(1)
        log.warning("timing_tampering", candidate=bad, reason=error[:200])
        out.rejected.append(Verification.of(bad, "timing", False, "timing_tampering", error[:600], backend.name))
        out.survivors.remove(bad)
        out.variants = [v for v in variants if v["id"] != bad]
        if out.survivors:
            result, error, seconds = bench_variants(task_path, out.variants, backend, rounds=rounds, timeout=timeout)
            out.seconds += seconds
            out.device_seconds += (result or {}).get("device_seconds", 0.0)
    if result is not None:   # the outputs of the calls it timed (bench.TimedOutputs), against the reference
        for cid, why in timed_mismatches(result).items():
            if cid in out.survivors:
                log.warning("timed_output_mismatch", candidate=cid, reason=why[:200])
                out.rejected.append(Verification.of(
                    cid, "timing", False, "timed_output_mismatch", f"the outputs of the calls the benchmark timed "
                                                                   f"differ from the reference: {why}"[:600],
                    backend.name))
                out.survivors.remove(cid)
    if result is None:
        log.warning("bench_failed", error=error)
        out.rejected += [Verification.of(cid, "timing", False, "bench_failed", error[:600], backend.name)
                         for cid in out.survivors]
        out.survivors = []
    out.result, out.error = result, error
    return out


def timed_mismatches(result: dict[str, Any]) -> dict[str, str]:
    """Variant id -> the first case where the outputs of its timed calls differed from the reference (the bench job's
    ``outputs_checked``, ``tools/bench/bench.py``)."""
    out: dict[str, str] = {}
    for entry in result.get("shapes") or []:
        for vid, v in (entry.get("variants") or {}).items():
            bad = (v.get("outputs_checked") or {}).get("mismatch") if isinstance(v, dict) else None
            if bad and vid not in out:
                out[vid] = f"shape {entry.get('shape')} {entry.get('dtype')}: {bad}"
    return out


#: how a hardware check that could not run because ncu is missing begins its note
NCU_MISSING = "ncu not available"
#: the hardware check could not measure the initial kernel (ncu failed on the task's own code): no
#: evidence about the claim either way, so no rejection; the report says the speedup is unconfirmed
HW_UNAVAILABLE = "hardware check unavailable"
#: a claimed speedup the hardware's kernel durations fall short of by more than this is rejected
HW_TOLERANCE = 0.10


def claim_case(result: dict[str, Any], cand_id: str) -> tuple[dict[str, Any] | None, float | None]:
    """The bench case the hardware checks a claim at, and the claim there: the case (shape, dtype) where ``cand_id``'s
    measured gain over the initial kernel is largest, and that gain. A faked clock that lifts a claim lifts it most
    somewhere, and that is where ncu looks; and a candidate faster on some shapes only is not held to its geomean on
    a shape where it gains nothing. The first case (the task's first bench shape and dtype, where the hwcheck job
    measures without one) is ``None``. (None, None) without that candidate's times."""
    best_i, best_gain = -1, None
    for i, entry in enumerate(result.get("shapes") or []):
        ini, cand = entry["variants"].get("initial"), entry["variants"].get(cand_id)
        if not ini or not cand or not cand.get("median_ms"):
            continue
        gain = ini["median_ms"] / cand["median_ms"]
        if best_gain is None or gain > best_gain:
            best_i, best_gain = i, gain
    if best_gain is None:
        return None, None
    entry = result["shapes"][best_i]
    return (None if best_i == 0 else {"shape": entry["shape"], "dtype": entry.get("dtype")}), best_gain


def _hwcheck_job(task_path: str, backend: Backend, timeout: float, measure: list[str],
                 best_path: str | None = None, speculative: bool = False,
                 case: dict[str, Any] | None = None) -> dict[str, Any]:
    """One hwcheck job's answer (``{"ok": False, "note": ...}`` when it did not measure). ``speculative``: no
    round waits on it yet; its ncu sessions let every urgent one go first (``gpulock.take_profiler``). ``case``: the
    bench case to measure at (``claim_case``), else the task's first bench shape."""
    job = {"kind": "hwcheck", "task": str(Path(task_path).resolve()), "measure": measure,
           **({"candidate": str(Path(best_path).resolve())} if best_path else {}),
           **({"speculative": True} if speculative else {}),
           **({"shape": case["shape"], **({"dtype": case["dtype"]} if case.get("dtype") else {})} if case else {})}
    # the trusted layer of the task's compiles (as every bench and judge job): the initial kernel's warm-up call
    # under the profiler lock loads its binary instead of compiling it while every other task's check waits
    extra = triton_cache.reader_env(Path(task_path).read_text()) if triton_cache.enabled() else {}
    r, _, device_s = run_device_job(job, backend, timeout, extra_env=extra)
    res = r.result or {}
    if not (r.ok and res.get("ok")):
        return {"ok": False, "note": (res.get("note") or "{}: {}".format(*job_error(r)))[:400],
                "device_seconds": device_s}
    return {**res, "device_seconds": device_s}


#: when the initial kernel's half of the hardware check starts: "triage" (default: once the probe accepted the
#: task, beside the rewrite and the screen; wasted where no round has a winner) or "contender" (when a round first
#: has a would-be winner, beside its full checks)
HW_INITIAL_AT_ENV = "TRITONDX_HW_INITIAL_AT"
_initial_jobs = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tdx-hw-initial")
_initial: dict[tuple, Future] = {}
#: the initial halves (``initial_hardware``'s futures) whose device seconds a check has already counted: one half
#: serves the task's later rounds, its seconds count once. Weak, and the futures themselves rather than their ids: a
#: half nothing holds any more leaves it, and a later one is never taken for it
_initial_counted: weakref.WeakSet[Future] = weakref.WeakSet()
_initial_counted_lock = threading.Lock()


def _initial_device_seconds(initial: Future) -> float:
    """The device seconds of an initial half's answer, the first time a check asks for them; 0.0 after that."""
    with _initial_counted_lock:
        if initial in _initial_counted:
            return 0.0
        _initial_counted.add(initial)
    return float(initial.result().get("device_seconds") or 0.0)


def initial_hardware(task_path: str, backend: Backend, timeout: float = 900, speculative: bool = False,
                     case: dict[str, Any] | None = None) -> Future:
    """The initial kernel's half of the hardware check, started now in the background (by triage once the probe
    accepted the task, or by the verifier when a round first has a would-be winner: ``HW_INITIAL_AT_ENV``) and
    kept for the task's later rounds: the task's own kernel at the same shape. Its answer: a hwcheck job's answer.
    ``speculative`` (triage's: no round has a winner yet): its ncu session yields to urgent ones. ``case``: the bench
    case (``claim_case``); one measurement per case."""
    key = (str(Path(task_path).resolve()), hashlib.sha256(Path(task_path).read_bytes()).hexdigest(), backend.name,
           json.dumps(case, sort_keys=True, default=str))
    fut = _initial.get(key)
    if fut is None or (fut.done() and not fut.result().get("ok")):
        fut = _initial[key] = _initial_jobs.submit(_hwcheck_job, task_path, backend, timeout, ["initial"],
                                                         None, speculative, case)
    return fut


#: how an early measurement that no check will use ends (``discard_early``) when it had not measured the best yet
NOT_NEEDED = "not needed: the contender it was started for did not win at this case"


def hardware_measurement(task_path: str, best_path: str, backend: Backend, timeout: float = 900,
                         initial: Future | None = None, case: dict[str, Any] | None = None,
                         stop: threading.Event | None = None) -> dict[str, Any]:
    """ncu's summed kernel durations per call of the initial kernel and ``best_path`` (``verify/judge/hwcheck.py``):
    a hwcheck job's answer with both parts, or ``{"ok": False, "note": ...}``. ``initial``: the initial
    kernel's measurement started earlier (``initial_hardware``); then this job measures the best alone, after
    it (each under ncu in a process of its own either way, never at once, the original first). ``stop`` set while the
    initial half runs: the best is not measured (``discard_early``) and the initial half stays uncounted, for the check
    that uses it."""
    if initial is None:
        return _hwcheck_job(task_path, backend, timeout, ["initial", "best"], best_path, case=case)
    first = initial.result()
    if stop is not None and stop.is_set():
        return {"ok": False, "note": NOT_NEEDED, "device_seconds": 0.0}
    if not first.get("ok"):
        return {**first, "device_seconds": _initial_device_seconds(initial)}
    res = _hwcheck_job(task_path, backend, timeout, ["best"], best_path, case=case)
    res["device_seconds"] = res.get("device_seconds", 0.0) + _initial_device_seconds(initial)
    return {**res, "initial": first["initial"], "initial_measured_before": True} if res.get("ok") else res


_early_jobs = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tdx-hw-early")
#: an early measurement's stop switch (``discard_early``), by its future
_early_stops: weakref.WeakKeyDictionary[Future, threading.Event] = weakref.WeakKeyDictionary()
#: device seconds of early measurements no check used, by run folder (two runs of one task in one process, as in the
#: LangGraph server, count their own), until the run's next verifier step adds them
_unused: dict[str, float] = {}
_unused_lock = threading.Lock()


def discard_early(run: str | Path, fut: Future) -> None:
    """An early measurement (``early_hardware``) that no check will use: the contender lost its full checks, or won at
    another case. Cancelled if it has not started; stopped before its ncu session of the best if that has not started
    (the initial half it waited on stays uncounted, for the check that uses it); otherwise it ends on its own and its
    device seconds are kept for the run (``unused_device_seconds``): they were spent, and a run's cost says so."""
    stop = _early_stops.get(fut)
    if stop is not None:
        stop.set()
    if fut.cancel():
        return
    key = str(Path(run).resolve())

    def count(f: Future) -> None:
        try:
            spent = float(f.result().get("device_seconds") or 0.0)
        except Exception:  # noqa: BLE001 - a measurement that raised spent nothing this can count
            return
        with _unused_lock:
            _unused[key] = _unused.get(key, 0.0) + spent
    fut.add_done_callback(count)


def unused_device_seconds(run: str | Path) -> float:
    """The device seconds of the discarded early measurements of the run in folder ``run`` that have ended since the
    last call (once)."""
    with _unused_lock:
        return _unused.pop(str(Path(run).resolve()), 0.0)


def early_hardware(task_path: str, best_path: str, backend: Backend, timeout: float = 900,
                   initial: Future | None = None, case: dict[str, Any] | None = None) -> Future:
    """``hardware_measurement`` of a would-be winner started now in the background (the verifier starts it for
    the fastest contender beside its full checks, after the initial half); ``hardware_check(measured=)``
    judges it against the claim once the round has picked its winner."""
    stop = threading.Event()
    fut = _early_jobs.submit(hardware_measurement, task_path, best_path, backend, timeout, initial, case, stop)
    _early_stops[fut] = stop
    return fut


def hardware_check(task_path: str, best_path: str, claimed: float, backend: Backend,
                   timeout: float = 900, initial: Future | None = None,
                   measured: Future | None = None, case: dict[str, Any] | None = None) -> HardwareCheck:
    """Confirmed when the hardware's speedup (``hardware_measurement``) is at least the claimed one less
    ``HW_TOLERANCE``; where ncu is missing or could not measure, unconfirmed with that note (the caller
    decides). ``measured``: the measurement of ``best_path`` already started (``early_hardware``)."""
    res = measured.result() if measured is not None else \
        hardware_measurement(task_path, best_path, backend, timeout, initial, case)
    if not res.get("ok"):
        return HardwareCheck(claimed=claimed, note=str(res.get("note"))[:400],
                             device_seconds=round(float(res.get("device_seconds") or 0.0), 4))
    return judge_hardware(res, claimed)


# ATen / library kernels as ncu names them, e.g.
# "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>"
# "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
LIBRARY_KERNEL_RE = re.compile(r"at::native|at::cuda|cublas|cutlass|xmma|cudnn|gemm|nvjet", re.I)
# fills (torch.zeros / full / fill_: allowed ops of a launcher), e.g. "... at::native::FillFunctor<float> ..."
FILL_KERNEL_RE = re.compile(r"FillFunctor|fill_kernel", re.I)


def judge_hardware(res: dict[str, Any], claimed: float) -> HardwareCheck:
    """The hwcheck job's measurement against the claimed speedup: confirmed when the hardware's
    speedup (initial / best kernel time per call) is at least the claim less ``HW_TOLERANCE``, and
    the best kernel's device time is not in library kernels (ATen, cuBLAS) the initial does not launch."""
    ini, best = res["initial"]["ns_per_call"], res["best"]["ns_per_call"]
    kernels = res["best"].get("kernels", [])
    measured = ini / best if best > 0 else None
    library = sorted(k for k in kernels if LIBRARY_KERNEL_RE.search(k) and not FILL_KERNEL_RE.search(k)
                     and k not in set(res["initial"].get("kernels", [])))
    at = f" at {res.get('shape')}" + (f" {res['dtype']}" if res.get("dtype") else "") if res.get("shape") else ""
    if measured is None:
        note, ok = "ncu measured no kernel time for the best kernel", False
    else:
        note = (f"ncu{at}: {ini / 1e3:.1f} us -> {best / 1e3:.1f} us per call ({measured:.2f}x) vs claimed "
                f"{claimed:.2f}x there")
        ok = measured >= claimed * (1 - HW_TOLERANCE)
    if library:
        note, ok = f"{note}; library kernels the initial does not launch: {library[:3]}", False
    secs = {part: {**(res[part].get("seconds") or {}), "preloaded": bool(res[part].get("preloaded"))}
            for part in ("initial", "best") if isinstance(res[part].get("seconds"), dict)}
    return HardwareCheck(claimed=claimed, measured=measured, initial_ns_per_call=ini, best_ns_per_call=best,
                         confirmed=ok, note=note, best_kernels=kernels, ncu_seconds=secs, shape=res.get("shape"),
                         dtype=res.get("dtype"),
                         device_seconds=round(float(res.get("device_seconds") or 0.0), 4))
