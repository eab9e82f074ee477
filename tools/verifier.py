"""Orchestrator side of verification and timing: builds jobs, runs them sandboxed, reads results."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from tritondx.errors import TaskFormatError
from tritondx.tools.backends.base import Backend
from tritondx.tools.gpulock import JOB_ALONE_ENV, held_seconds
from tritondx.tools.sandbox import JobResult, run_job

log = structlog.get_logger(__name__)

CEILINGS_FILE = Path(os.environ.get("TRITONDX_CACHE", Path.home() / ".cache" / "tritondx")) / "ceilings.json"


class Verification(BaseModel):
    candidate_id: str
    passed: bool
    klass: str | None = None      # rejection class (mismatch, torch_compute, timeout, segfault, ...)
    reason: str = ""
    backend: str
    checks: int = 0
    seconds: float = 0.0          # the job's wall time (start-up, imports, compiles, waits included)
    device_s: float = 0.0         # of which the job held the device (tools/gpulock.py phases)
    speed_measured: bool = False
    coverage: list[str] = []      # what was checked: cases, dropped cases, added branches (tools/verify/cases.py)


def _job_error(r: JobResult) -> tuple[str, str]:
    if r.ok and r.result is not None:
        return r.result.get("class", "error"), r.result.get("error", "")
    if r.result is not None and r.result.get("class"):  # answered, then died (e.g. CUDA teardown after a fault)
        return r.result["class"], r.result.get("error", "")
    return r.kind, r.message


def _run_device_job(job: dict[str, Any], backend: Backend, timeout: float, memory_bytes: int | None = None,
                    **log_kw: Any) -> tuple[JobResult, float, float]:
    """Run a verify or bench job with the device lock. On a device shared by a batch (a lock folder set)
    a CUDA OOM may have been other jobs' memory (H200, 2026-11-30: 16 of 153 honest verifications, and
    l1_cast's final bench beside 13 other tasks), so it runs once more with the device alone; a job that
    needs more than the device has fails again. Returns the last answer and the wall and device-held
    seconds of all attempts."""
    r = run_job(job, timeout=timeout, env=backend.job_env(), memory_bytes=memory_bytes, gpu_lock=backend.can_time)
    seconds, device_s = r.seconds, held_seconds((r.result or {}).get("device_usage"))
    if backend.can_time and _job_error(r)[0] == "out_of_memory" and os.environ.get("TRITONDX_LOCK_DIR"):
        log.info(f"{job['kind']}_retry_alone", reason=_job_error(r)[1][:160], **log_kw)
        r = run_job(job, timeout=timeout, env={**backend.job_env(), JOB_ALONE_ENV: "1"}, memory_bytes=memory_bytes,
                    gpu_lock=True)
        seconds += r.seconds
        device_s += held_seconds((r.result or {}).get("device_usage"))
    return r, seconds, device_s


PROBE_TIMEOUT_S = 300.0


def probe_timeout() -> float:
    """Seconds the probe job may take: ``TRITONDX_PROBE_TIMEOUT`` or 300."""
    try:
        return float(os.environ.get("TRITONDX_PROBE_TIMEOUT") or PROBE_TIMEOUT_S)
    except ValueError:
        return PROBE_TIMEOUT_S


def _probe_failure(r: JobResult, timeout: float, memory_bytes: int | None) -> str:
    """One line for a probe job that ended without answering."""
    if r.kind == "timeout":
        return (f"running the task did not finish within {timeout:.0f} s (an endless loop at import, in "
                "make_inputs, reference or launch?); TRITONDX_PROBE_TIMEOUT sets the limit")
    if r.kind == "no_result":
        return (f"the task ended the process (exit code {r.returncode}) before the probe finished "
                "(os._exit() or a signal in task code?)")
    if r.kind == "segfault":
        return "running the task crashed the process (segmentation fault)"
    if r.kind == "out_of_memory":
        limit = f" (limit {memory_bytes / 2 ** 30:.0f} GiB)" if memory_bytes else ""
        return f"running the task ran out of memory{limit}: is a CHECK_SHAPES entry too large for this device?"
    if r.kind == "illegal_memory_access":
        return f"the initial kernel made an illegal memory access: {r.message}"
    return f"probe failed: {r.message}"


def probe_task(task_path: str, backend: Backend, timeout: float | None = None) -> dict[str, Any]:
    """Run the task once in a sandbox; raise TaskFormatError with one line if it is not usable.
    ``timeout``: None takes ``TRITONDX_PROBE_TIMEOUT`` (default 300 s). The job gets the backend's
    default memory limit, so an oversized shape fails fast instead of exhausting the host."""
    timeout = probe_timeout() if timeout is None else timeout
    memory_bytes = DEFAULT_MEMORY_BYTES.get(backend.name)
    r = run_job({"kind": "probe", "task": str(Path(task_path).resolve()), "device": backend.torch_device},
                timeout=timeout, env=backend.job_env(), memory_bytes=memory_bytes, gpu_lock=backend.can_time)
    if not r.ok:
        raise TaskFormatError(task_path, _probe_failure(r, timeout, memory_bytes))
    res = r.result or {}
    if not res.get("ok"):
        raise TaskFormatError(task_path, res.get("problem") or res.get("error", "unusable task"))
    return res


# Static integrity rules: source constructs a launcher may not use to produce or time its output.
# A needle that the original task's source also holds is allowed (the rule is about what changed).
# These are a cheap first line; the dynamic checks in verify_impl / guard catch the same classes
# when the source hides them (getattr, aliases, string building).
STATIC_RULES = {
    "timing_tampering": ("do_bench =", "perf_counter =", "Event.elapsed_time =", "Event.record =",
                         "synchronize =", "time.time =", "elapsed_time =", "perf_counter_ns =", "monotonic =",
                         "__code__ ="),
    "side_stream": ("torch.cuda.Stream(", "torch.cuda.stream(", "Stream(", "set_stream", "ExternalStream",
                    "get_current_stream"),
    "l2_persistence": ("accessPolicyWindow", "persisting_l2", "cudaLimitPersistingL2CacheSize",
                       "set_per_process_memory_fraction"),
    # Reaching into the verifier's own machinery (it runs in the candidate's process), rewriting a
    # function's code object, running Python inside a Triton launch, or allocating memory that
    # bypasses the dispatcher (and so the poisoning of fresh allocations).
    "verifier_tampering": ("tritondx.", "import tritondx", "_python_dispatch", "TorchDispatchMode",
                           "_set_dispatch_mode", "_pop_mode", "sys.modules", "gc.get_objects",
                           "gc.get_referrers", "__code__", "add_pre_run_hook", "launch_enter_hook",
                           "launch_exit_hook", "in_triton", "UntypedStorage"),
    # Computing on the host outside torch's dispatcher (invisible to the op recorder).
    "host_compute": (".numpy(", "from_numpy", ".tolist(", "import numpy", "cupy", "numba", "__array__",
                     "dlpack"),
}

# Address-space limit (RLIMIT_AS) of a verification job when the caller gives none, per backend.
# The interpreter runs small CHECK_SHAPES on the host: a worker needs about 1 GiB of address space,
# so 8 GiB leaves room for honest candidates and stops a runaway allocation long before the host
# runs out. CUDA jobs get no limit: the CUDA driver reserves far more address space than it uses.
DEFAULT_MEMORY_BYTES = {"interpreter": 8 << 30}


def static_integrity(candidate_source: str, original_source: str) -> tuple[str, str] | None:
    """Reject constructs that only make sense for cheating; None when clean."""
    for klass, needles in STATIC_RULES.items():
        for n in needles:
            if n in candidate_source and n not in original_source:
                return klass, f"candidate source uses `{n.strip()}`"
    tree = ast.parse(candidate_source)
    launch = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    orig_launch = next((n for n in ast.parse(original_source).body
                        if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if launch is not None:
        has_try = any(isinstance(n, ast.Try) for n in ast.walk(launch))
        had_try = orig_launch is not None and any(isinstance(n, ast.Try) for n in ast.walk(orig_launch))
        if has_try and not had_try:
            return "torch_fallback", "launch() wraps work in try/except (a fallback path the timer may take)"
        for n in ast.walk(launch):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "reference":
                return "calls_reference", "launch() calls reference()"
        globals_used = [n for n in ast.walk(launch) if isinstance(n, ast.Global)]
        if globals_used:
            return "caches_outputs", "launch() writes module globals (output caching)"
    return None


def verify_candidate(task_path: str, candidate_path: str, candidate_id: str, backend: Backend,
                     include_bench: bool = False, allowed_ops: list[str] | None = None, timeout: float = 600,
                     seed: int = 0, memory_bytes: int | None = None) -> Verification:
    """Static checks, then the sandboxed ``verify`` job. ``memory_bytes``: the job's address-space
    limit; None takes the backend's default (``DEFAULT_MEMORY_BYTES``)."""
    cand_src = Path(candidate_path).read_text()
    orig_src = Path(task_path).read_text()
    bad = static_integrity(cand_src, orig_src) if candidate_path != task_path else None
    if bad:
        return Verification(candidate_id=candidate_id, passed=False, klass=bad[0], reason=bad[1],
                            backend=backend.name)
    job = {"kind": "verify", "task": str(Path(task_path).resolve()), "candidate": str(Path(candidate_path).resolve()),
           "device": backend.torch_device, "include_bench": include_bench, "allowed_ops": allowed_ops or [],
           "seed": seed}
    if memory_bytes is None:
        memory_bytes = DEFAULT_MEMORY_BYTES.get(backend.name)
    r, seconds, device_s = _run_device_job(job, backend, timeout, memory_bytes, candidate=candidate_id)
    if r.ok and r.result and r.result.get("passed"):
        return Verification(candidate_id=candidate_id, passed=True, backend=backend.name,
                            checks=len(r.result.get("checks", [])), seconds=seconds, device_s=device_s,
                            speed_measured=False, coverage=list(r.result.get("coverage", [])))
    klass, reason = _job_error(r)
    return Verification(candidate_id=candidate_id, passed=False, klass=klass, reason=reason[:600],
                        backend=backend.name, seconds=seconds, device_s=device_s)


def bench_variants(task_path: str, variants: list[dict[str, str]], backend: Backend, rounds: int = 5,
                   baselines: bool = False, timeout: float = 900) -> tuple[dict[str, Any] | None, str, float]:
    """Time the variants side by side in one process. Returns (result, error, seconds): the job's wall
    seconds; ``result["device_seconds"]`` is how long its job(s) held the device."""
    if not backend.can_time:
        return None, f"speed not measured: backend {backend.name} cannot time kernels", 0.0
    job = {"kind": "bench", "task": str(Path(task_path).resolve()),
           "variants": [{"id": v["id"], "path": str(Path(v["path"]).resolve())} for v in variants],
           "rounds": rounds, "baselines": baselines, "ceilings_file": str(CEILINGS_FILE)}
    r, seconds, device_s = _run_device_job(job, backend, timeout)
    if r.ok and r.result and "shapes" in r.result:
        return {**r.result, "device_seconds": round(device_s, 4)}, "", seconds
    klass, reason = _job_error(r)
    return None, f"{klass}: {reason}", seconds


def capture_ir(task_path: str, out_dir: Path, target: str, per_pass: bool, timeout: float = 600,
               shape: Any = None) -> tuple[dict[str, Any] | None, str]:
    job = {"kind": "capture", "task": str(Path(task_path).resolve()), "target": target,
           "out_dir": str(out_dir.resolve()), "per_pass": per_pass, "shape": shape}
    r = run_job(job, timeout=timeout)
    if r.ok and r.result and "launches" in r.result:
        return r.result, ""
    klass, reason = _job_error(r)
    return None, f"{klass}: {reason}"
