"""The probe of a task, orchestrator side: run the task once in a sandboxed ``probe`` job (its worker side is
``verify/judge/probe.probe``, with the checks of ``task/probe.py``) and answer whether it is usable, or raise
``TaskFormatError`` with one line that says why not."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tritondx.errors import TaskFormatError
from tritondx.tools.backends.base import Backend
from tritondx.tools.exec import triton_cache
from tritondx.tools.exec.jobs import DEFAULT_MEMORY_BYTES
from tritondx.tools.exec.sandbox import JobResult, run_job

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
