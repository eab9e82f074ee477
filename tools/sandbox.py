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
import threading
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


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
try:  # resolved here: a preexec function must not import anything (the fork may hold the import lock)
    import ctypes
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (ImportError, OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent(parent: int | None = None) -> None:
    """Linux: SIGKILL this process when the thread that started it dies, so that a job never outlives
    the run that started it (a run killed with SIGKILL would otherwise leave its jobs running).
    ``parent``: the pid that forked us; if it is already gone (it died before the prctl), exit now.
    Elsewhere a no-op: the timeout still bounds the job while the parent lives."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(137)


def die_with_parent_fn():
    """A ``preexec_fn`` for any child that must not outlive this process (batch's optimize runs)."""
    parent = os.getpid()
    return lambda: _die_with_parent(parent)


# The lifeline: a pipe whose write end only this process holds (never inherited). Every job gets the
# read end and exits when it reads EOF, i.e. when this process is gone, however it died. It closes the
# gaps the parent-death signal leaves: a job inside ``unshare --fork`` is a grandchild, and unshare
# arms its own ``--kill-child`` only after forking.
_LIFELINE: tuple[int, int] | None = None
_LIFELINE_LOCK = threading.Lock()
LIFELINE_ENV = "TRITONDX_JOB_LIFELINE_FD"


def _lifeline_fd() -> int:
    global _LIFELINE
    with _LIFELINE_LOCK:
        if _LIFELINE is None:
            _LIFELINE = os.pipe()  # both ends non-inheritable; pass_fds hands the read end to a job
        return _LIFELINE[0]


def watch_lifeline() -> None:
    """In a job: exit as soon as the process that started it is gone (see ``_lifeline_fd``)."""
    fd = os.environ.pop(LIFELINE_ENV, "")
    if not fd.isdigit():
        return

    def wait() -> None:
        try:
            while os.read(int(fd), 1):
                pass
        except OSError:
            pass
        os._exit(137)

    threading.Thread(target=wait, name="tritondx-lifeline", daemon=True).start()


def _limits(memory_bytes: int | None):
    parent = os.getpid()

    def apply() -> None:
        os.setsid()
        _die_with_parent(parent)
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


class Isolation(BaseModel):
    """What the kernel lets the sandbox take away from a job (probed once per process)."""

    prefix: list[str] = []
    network: bool = False     # own network namespace: no links, not even loopback to the host
    pids: bool = False        # own PID namespace and /proc: the parent (its environ, argv, cwd) is invisible
    readonly: bool = False    # own mount namespace: the run folder is bind-mounted read-only
    note: str = ""            # why something is missing

    @property
    def missing(self) -> list[str]:
        return [n for n, ok in (("network", self.network), ("pids", self.pids), ("readonly", self.readonly))
                if not ok]


_ISOLATION: dict[str, Isolation] = {}
_ISOLATION_LOCK = threading.Lock()
_FULL = ["unshare", "-rn", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _try(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10, preexec_fn=_die_with_parent).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def isolation() -> Isolation:
    """The strongest isolation this machine allows: network + PID + mount namespaces (``unshare``),
    else a network namespace only, else none. ``TRITONDX_SANDBOX=net`` asks for the network namespace
    only; ``TRITONDX_NO_NETNS=1`` turns namespaces off. Probed once per setting; the first candidate
    job run with less than all of it logs a warning saying what is missing."""
    key = os.environ.get("TRITONDX_NO_NETNS", "")
    if key != "1" and os.environ.get("TRITONDX_SANDBOX", "").strip().lower() == "net":
        key = "net"  # network namespace only (no PID / mount namespaces)
    with _ISOLATION_LOCK:
        if key not in _ISOLATION:
            _ISOLATION[key] = _probe_isolation(key)
        return _ISOLATION[key]


def _probe_isolation(key: str) -> Isolation:
    iso = Isolation()
    exe = shutil.which("unshare")
    if exe and key != "1":
        ro_ok = False
        if key != "net":
            probe_dir = Path(tempfile.mkdtemp(prefix="tritondx-ro-probe-"))
            try:
                d = str(probe_dir)
                ro_ok = _try(_FULL + ["sh", "-c", _mount_script([d], []) + f"! touch {d}/x 2>/dev/null"])
            finally:
                shutil.rmtree(probe_dir, ignore_errors=True)
        if ro_ok:
            iso = Isolation(prefix=list(_FULL), network=True, pids=True, readonly=True)
        elif _try([exe, "-rn", "true"]):
            iso = Isolation(prefix=["unshare", "-rn"], network=True)
    iso.note = ("TRITONDX_NO_NETNS=1 turned namespaces off" if key == "1" else
                "TRITONDX_SANDBOX=net: network namespace only" if key == "net" and iso.network else
                "unshare (user namespaces) is unavailable or restricted here" if iso.missing else "")
    if not iso.pids and _prctl is not None:
        # Jobs can see this process in /proc: make it non-dumpable, so that code running as the
        # same (non-root) user cannot read its environment (API keys) or memory.
        _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        iso.note += "; this process is marked non-dumpable (its /proc environ is closed to jobs)"
    log.debug("sandbox_isolation", network=iso.network, pids=iso.pids, readonly=iso.readonly, note=iso.note)
    return iso


_WARNED: set[str] = set()


def _warn_weak(iso: Isolation, kind: str) -> None:
    """Once per process, when candidate code is about to run with less isolation than wanted
    (the probe of the user's own task stays quiet: a bad task is answered with one line)."""
    if not iso.missing or kind not in ("verify", "bench") or iso.note in _WARNED:
        return
    _WARNED.add(iso.note)
    log.warning("sandbox_weak_isolation", missing=iso.missing, why=iso.note,
                kept="scrubbed environment, private working directory, timeout, memory limit")


def _net_isolation_prefix() -> list[str]:
    """The namespace prefix of a job command (kept for callers of the old name)."""
    return isolation().prefix


_RO_FAILED = "tritondx-sandbox: could not make read-only:"


def _mount_script(readonly: list[str], writable: list[str]) -> str:
    """Shell lines run inside the job's mount namespace before the worker starts: bind each
    ``readonly`` folder onto itself read-only, then each ``writable`` one (inside them) read-write."""
    import shlex
    lines = []
    for d in readonly:
        q = shlex.quote(d)
        lines.append(f"{{ mount --bind {q} {q} && mount -o remount,bind,ro {q}; }} "
                     f"|| echo {shlex.quote(_RO_FAILED + ' ' + d)} >&2")
    for d in writable:  # a bind inside a read-only bind starts read-only too: remount it read-write
        q = shlex.quote(d)
        lines.append(f"{{ mount --bind {q} {q} && mount -o remount,bind,rw {q}; }} "
                     f"|| echo {shlex.quote(_RO_FAILED.replace('read-only', 'writable') + ' ' + d)} >&2")
    return "".join(line + "; " for line in lines)


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _job_paths(job: dict[str, Any], must_write: list[Path]) -> tuple[list[str], list[str]]:
    """Folders a job reads its task and candidates from (made read-only for it) and folders inside
    them it must write to (``out_dir``). A folder is never made read-only when a path the job must
    write (its working directory, the Triton cache, the temp dir) lies inside it."""
    reads = [job.get("task"), job.get("candidate")] + [v.get("path") for v in job.get("variants") or []
                                                       if isinstance(v, dict)]
    folders: list[Path] = []
    for r in reads:
        if isinstance(r, str) and r:
            try:
                folder = Path(r).resolve().parent
            except (OSError, RuntimeError):
                continue
            if folder.is_dir() and folder not in folders and folder != Path("/") \
                    and not any(_is_within(w, folder) for w in must_write):
                folders.append(folder)
    writable: list[str] = []
    out_dir = job.get("out_dir")
    if isinstance(out_dir, str) and out_dir:
        od = Path(out_dir).resolve()
        if any(_is_within(od, f) for f in folders):
            od.mkdir(parents=True, exist_ok=True)
            writable.append(str(od))
    return [str(f) for f in folders], writable


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
    gpu_lock: bool = False,
) -> JobResult:
    """Run one worker job; never raises for anything the job does. ``gpu_lock``: hand the job
    descriptors of the batch's device lock (``tools/gpulock.py``), which it takes around its device
    work; without a lock directory this changes nothing."""
    if gpu_lock:
        from tritondx.tools.gpulock import job_lock_fds
        with job_lock_fds() as (fds, lock_env):
            return _run_job(job, timeout, python, {**(env or {}), **lock_env}, memory_bytes, network, fds)
    return _run_job(job, timeout, python, env, memory_bytes, network, ())


def _run_job(job: dict[str, Any], timeout: float, python: str | None, env: dict[str, str] | None,
             memory_bytes: int | None, network: bool, lock_fds: tuple[int, ...]) -> JobResult:
    workdir = Path(tempfile.mkdtemp(prefix="tritondx-job-"))
    job_file, result_file = workdir / "job.json", workdir / "result.json"
    job_file.write_text(json.dumps(job))
    cmd = [python or sys.executable, "-m", "tritondx.tools.worker", str(job_file), str(result_file)]
    job_env = scrubbed_env(env)
    job_env["HOME"] = str(workdir)
    # the job's temporary files (compile scratch, caches it makes) go with its folder, even after a crash
    (workdir / "tmp").mkdir()
    job_env["TMPDIR"] = str(workdir / "tmp")
    job_env.setdefault("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / "tritondx-triton-cache"))
    if not network:
        iso = isolation()
        _warn_weak(iso, str(job.get("kind")))
        if iso.readonly:
            must_write = [workdir.resolve(), Path(tempfile.gettempdir()).resolve(),
                          Path(job_env["TRITON_CACHE_DIR"]).resolve()]
            if isinstance(job.get("ceilings_file"), str):
                must_write.append(Path(job["ceilings_file"]).resolve().parent)
            ro, rw = _job_paths(job, must_write)
            if ro:
                cmd = ["sh", "-c", _mount_script(ro, rw) + 'exec "$@"', "sh"] + cmd
        cmd = iso.prefix + cmd
    start = time.monotonic()
    timed_out = False
    lifeline = _lifeline_fd()
    job_env[LIFELINE_ENV] = str(lifeline)
    proc = subprocess.Popen(cmd, cwd=workdir, env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, pass_fds=(lifeline, *lock_fds), preexec_fn=_limits(memory_bytes),
                            text=True, errors="replace")
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
        if kind == "no_result":
            message = (f"no_result: the job exited (code {proc.returncode}) without writing a result "
                       "(os._exit() or sys.exit() in task code?)")
    if "tritondx-sandbox: could not make" in stderr:
        log.warning("sandbox_mount_failed", line=next(ln for ln in stderr.splitlines()
                                                      if "tritondx-sandbox: could not make" in ln))
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
