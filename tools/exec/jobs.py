"""Running a job on the backend's device (orchestrator side): ``run_device_job`` (the device lock, a retry alone
after running out of device memory on a shared device), ``job_error`` (the class and reason of a job that did not
answer a result), ``DEFAULT_MEMORY_BYTES`` (a job's address-space limit per backend)."""

from __future__ import annotations

import os
from typing import Any

import structlog

from tritondx.tools.backends.base import Backend
from tritondx.tools.exec.gpulock import JOB_ALONE_ENV, held_seconds
from tritondx.tools.exec.sandbox import JobResult, run_job

log = structlog.get_logger(__name__)

# Address-space limit (RLIMIT_AS) of a verification job when the caller gives none, per backend.
# The interpreter runs small CHECK_SHAPES on the host: a worker needs about 1 GiB of address space,
# so 8 GiB leaves room for honest candidates and stops a runaway allocation long before the host
# runs out. CUDA jobs get no limit: the CUDA driver reserves far more address space than it uses.
DEFAULT_MEMORY_BYTES = {"interpreter": 8 << 30}


def job_error(r: JobResult) -> tuple[str, str]:
    if r.ok and r.result is not None:
        return r.result.get("class", "error"), r.result.get("error", "")
    if r.result is not None and r.result.get("class"):  # answered, then died (e.g. CUDA teardown after a fault)
        return r.result["class"], r.result.get("error", "")
    return r.kind, r.message


def run_device_job(job: dict[str, Any], backend: Backend, timeout: float, memory_bytes: int | None = None,
                   extra_env: dict[str, str] | None = None, **log_kw: Any) -> tuple[JobResult, float, float]:
    """Run a verify or bench job with the device lock. On a device shared by a batch (a lock folder set)
    a CUDA OOM may have been other jobs' memory (H200, 2026-11-30: 16 of 153 honest verifications, and
    l1_cast's final bench beside 13 other tasks), so it runs once more with the device alone; a job that
    needs more than the device has fails again. Returns the last answer and the wall and device-held
    seconds of all attempts."""
    env = {**backend.job_env(), **(extra_env or {})}
    r = run_job(job, timeout=timeout, env=env, memory_bytes=memory_bytes, gpu_lock=backend.can_time)
    seconds, device_s = r.seconds, held_seconds((r.result or {}).get("device_usage"))
    if backend.can_time and job_error(r)[0] == "out_of_memory" and os.environ.get("TRITONDX_LOCK_DIR"):
        log.info(f"{job['kind']}_retry_alone", reason=job_error(r)[1][:160], **log_kw)
        r = run_job(job, timeout=timeout, env={**env, JOB_ALONE_ENV: "1"}, memory_bytes=memory_bytes, gpu_lock=True)
        seconds += r.seconds
        device_s += held_seconds((r.result or {}).get("device_usage"))
    return r, seconds, device_s
