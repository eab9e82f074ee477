"""Orchestrator side of the task jobs: probe, capture, and (from ``tools/verify``) verification and timing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import structlog

from tritondx.errors import TaskFormatError
from tritondx.tools.exec import triton_cache
from tritondx.tools.backends.base import Backend
from tritondx.tools.exec.sandbox import JobResult, run_job
from tritondx.tools.verify.jobs import DEFAULT_MEMORY_BYTES, job_error
from tritondx.tools.verify.policy import STATIC_RULES, check as policy_check  # noqa: F401 (STATIC_RULES: callers)
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.timing import CEILINGS_FILE, bench_variants  # noqa: F401 (callers)
from tritondx.tools.verify.verification import verify_candidate  # noqa: F401 (callers)

log = structlog.get_logger(__name__)

#: the verdict record under its former name
Verification = Verdict


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
    env, cache = backend.job_env(), {}
    if triton_cache.enabled():  # only the original runs here: its compiles fill the task's trusted layer
        cache = {"cache_dir": triton_cache.writer_env(Path(task_path).read_text())["TRITON_CACHE_DIR"]}
    r = run_job({"kind": "probe", "task": str(Path(task_path).resolve()), "device": backend.torch_device},
                timeout=timeout, env=env, memory_bytes=memory_bytes, gpu_lock=backend.can_time, **cache)
    if not r.ok:
        raise TaskFormatError(task_path, _probe_failure(r, timeout, memory_bytes))
    res = r.result or {}
    if not res.get("ok"):
        raise TaskFormatError(task_path, res.get("problem") or res.get("error", "unusable task"))
    return res


def static_integrity(candidate_source: str, original_source: str) -> tuple[str, str] | None:
    """Reject constructs that only make sense for cheating; None when clean (``verify/policy.py``)."""
    return policy_check(candidate_source, original_source)


def capture_ir(task_path: str, out_dir: Path, target: str, per_pass: bool, timeout: float = 600,
               shape: Any = None) -> tuple[dict[str, Any] | None, str]:
    job = {"kind": "capture", "task": str(Path(task_path).resolve()), "target": target,
           "out_dir": str(out_dir.resolve()), "per_pass": per_pass, "shape": shape}
    r = run_job(job, timeout=timeout)
    if r.ok and r.result and "launches" in r.result:
        return r.result, ""
    klass, reason = job_error(r)
    return None, f"{klass}: {reason}"


def capture_many(task_paths: list[str], out_dir: Path, target: str, timeout: float = 600,
                 sass: bool = False) -> tuple[list[tuple[dict[str, Any] | None, str]] | None, str]:
    """``capture_ir`` (no per-pass dumps) of several candidates of one task in one job: one Python start and torch
    import for all; candidate i's IR in ``out_dir/c<i>``. ((manifest or None, problem) per candidate, "") or, when
    the job itself failed (a crash, a timeout: no candidate's answer is known), (None, problem)."""
    job = {"kind": "capture", "tasks": [str(Path(t).resolve()) for t in task_paths], "target": target,
           "out_dir": str(out_dir.resolve()), "out_names": [f"c{i}" for i in range(len(task_paths))],
           "per_pass": False, "sass": sass}
    r = run_job(job, timeout=timeout)
    if r.ok and r.result and isinstance(r.result.get("manifests"), list):
        return [(m, "" if m is not None else (e or "no manifest"))
                for m, e in zip(r.result["manifests"], r.result.get("errors") or [""] * len(task_paths))], ""
    klass, reason = job_error(r)
    return None, f"{klass}: {reason}"
