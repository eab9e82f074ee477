"""Run untrusted work (task and candidate code) in a separate process.

Each job runs ``python -m tritondx.tools.worker JOB.json RESULT.json`` in a private temporary
directory with a timeout, a scrubbed environment (no API keys, tokens or proxy credentials),
resource limits and, where the kernel allows it, no network. The worker writes its result as
JSON; a crash, hang or CUDA fault only ends that process, and is classified here.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel

log = structlog.get_logger(__name__)

FailureKind = Literal[
    "ok", "timeout", "segfault", "illegal_memory_access", "out_of_memory", "compile_error",
    "killed", "crashed", "no_result", "error",
]

# Environment variables a job may see; everything else is dropped.
ENV_ALLOW = {
    "PATH", "LANG", "LC_ALL", "TERM", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME", "CUDA_PATH", "TMPDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VIRTUAL_ENV",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ASCEND_HOME_PATH", "ASCEND_RT_VISIBLE_DEVICES",
}
ENV_ALLOW_PREFIXES = ("TRITON_", "TRITONDX_JOB_", "MLIR_", "LLVM_", "NVIDIA_", "CUBLAS_")
# Even an allowed prefix never passes a secret-looking name.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|PROXY", re.IGNORECASE)

# CUDA fault messages in a worker's stderr.
# e.g. "RuntimeError: CUDA error: an illegal memory access was encountered"
ILLEGAL_ACCESS_RE = re.compile(r"illegal memory access|misaligned address|unspecified launch failure", re.I)
# e.g. "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
OOM_RE = re.compile(r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError", re.I)
# e.g. "triton.compiler.errors.CompilationError: at 12:4:"
COMPILE_RE = re.compile(r"CompilationError|PTXASError|MLIR.*(error|failed)", re.I)

STDERR_KEEP = 4000


class JobResult(BaseModel):
    """What came back from one sandboxed job."""

    kind: FailureKind
    returncode: int | None
    seconds: float
    result: dict[str, Any] | None = None
    message: str = ""
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {}
    for k, v in os.environ.items():
        if SECRET_NAME.search(k):
            continue
        if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES):
            env[k] = v
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _limits(memory_bytes: int | None):
    def apply() -> None:
        os.setsid()
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


_UNSHARE_OK: bool | None = None


def _net_isolation_prefix() -> list[str]:
    """``unshare -rn`` when the kernel allows it: the job gets a network namespace with no links."""
    global _UNSHARE_OK
    if _UNSHARE_OK is None:
        exe = shutil.which("unshare")
        _UNSHARE_OK = False
        if exe and os.environ.get("TRITONDX_NO_NETNS") != "1":
            try:
                _UNSHARE_OK = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=5).returncode == 0
            except (OSError, subprocess.SubprocessError):
                _UNSHARE_OK = False
    return ["unshare", "-rn"] if _UNSHARE_OK else []


def classify(returncode: int | None, stderr: str, timed_out: bool) -> FailureKind:
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "ok"
    if ILLEGAL_ACCESS_RE.search(stderr):
        return "illegal_memory_access"
    if returncode is not None and returncode < 0:
        sig = -returncode
        if sig == signal.SIGSEGV or sig == signal.SIGBUS:
            return "segfault"
        if sig == signal.SIGKILL:
            return "out_of_memory" if OOM_RE.search(stderr) else "killed"
        return "crashed"
    if OOM_RE.search(stderr):
        return "out_of_memory"
    if COMPILE_RE.search(stderr):
        return "compile_error"
    return "error"


def run_job(
    job: dict[str, Any],
    timeout: float = 300.0,
    python: str | None = None,
    env: dict[str, str] | None = None,
    memory_bytes: int | None = None,
    network: bool = False,
) -> JobResult:
    """Run one worker job; never raises for anything the job does."""
    workdir = Path(tempfile.mkdtemp(prefix="tritondx-job-"))
    job_file, result_file = workdir / "job.json", workdir / "result.json"
    job_file.write_text(json.dumps(job))
    cmd = [python or sys.executable, "-m", "tritondx.tools.worker", str(job_file), str(result_file)]
    if not network:
        cmd = _net_isolation_prefix() + cmd
    job_env = scrubbed_env(env)
    job_env["HOME"] = str(workdir)
    job_env.setdefault("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / "tritondx-triton-cache"))
    start = time.monotonic()
    timed_out = False
    proc = subprocess.Popen(cmd, cwd=workdir, env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limits(memory_bytes), text=True, errors="replace")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    seconds = time.monotonic() - start
    stderr = (err or "") + (out or "")[-1000:]
    kind = classify(proc.returncode, stderr, timed_out)
    result = None
    if result_file.exists():
        try:
            result = json.loads(result_file.read_text())
        except json.JSONDecodeError:
            result = None
    if kind == "ok" and result is None:
        kind = "no_result"
    message = ""
    if kind != "ok":
        message = _one_line(kind, stderr, timeout)
    shutil.rmtree(workdir, ignore_errors=True)
    log.debug("job_done", job=job.get("kind"), outcome=kind, seconds=round(seconds, 2))
    return JobResult(kind=kind, returncode=proc.returncode, seconds=seconds, result=result, message=message,
                     stderr_tail=stderr[-STDERR_KEEP:])


def _one_line(kind: FailureKind, stderr: str, timeout: float) -> str:
    if kind == "timeout":
        return f"job did not finish within {timeout:.0f} s and was killed"
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "(no output)"
    return f"{kind}: {last[:300]}"
