"""Run untrusted work (task and candidate code) in a separate process.

Each job runs ``python -m tritondx.tools.exec.worker JOB.json RESULT.json`` with a timeout, a scrubbed
environment (no API keys, tokens or proxy credentials), resource limits and, where the machine allows
it, in a sandbox that leaves it nothing to keep (``tools/exec/sandbox_fs.py``): the whole file system
read-only but a private scratch folder (its cwd, HOME and TMPDIR, deleted after the job), no network,
its own PID namespace (the orchestrator is invisible; every process it starts ends with it), no
capabilities. The worker writes its result as JSON; a crash, hang or CUDA fault only ends that
process, and is classified here.
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

from tritondx.tools.exec import sandbox_fs

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
# Nor the judge's seal key (verify/judge/seal.py SEAL_ENV: its prefix is allowed and its name looks like no
# secret); a job that needs it gets it in ``extra``, never from the environment it was started in.
NEVER_PASSED = frozenset({"TRITONDX_JOB_SEAL"})

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
        if SECRET_NAME.search(k) or k in NEVER_PASSED:
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
#: "1" / "0" in every job's environment: whether the job runs inside a read-only sandbox (what the job cannot
#: probe itself: bwrap does not nest; its runners then get ``spawn.NESTED_RUNNER_NAMESPACES``). Not passed on to
#: candidate runners (no allowed prefix)
SANDBOXED_JOB_ENV = "TDX_SANDBOXED_JOB"


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
    readonly: bool = False    # the whole file system read-only but the job's scratch folder (tools/exec/sandbox_fs.py)
    mechanism: Literal["bwrap", "unshare", "net", "none"] = "none"
    note: str = ""            # why something is missing

    @property
    def missing(self) -> list[str]:
        return [n for n, ok in (("network", self.network), ("pids", self.pids), ("readonly", self.readonly))
                if not ok]


_ISOLATION: dict[str, Isolation] = {}
_ISOLATION_LOCK = threading.Lock()
_MECHANISMS = ("bwrap", "unshare", "net", "none")


def _try(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20, preexec_fn=_die_with_parent).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def isolation() -> Isolation:
    """The strongest isolation this machine allows: bubblewrap, else ``unshare`` with a mount script
    (both: read-only file system but a private scratch folder, own PID, network, IPC and UTS
    namespaces, no capabilities), else a network namespace only, else none.
    ``TRITONDX_SANDBOX=bwrap|unshare|net|none`` asks for one of them (or less, where it does not
    work); ``TRITONDX_NO_NETNS=1`` is ``none``. Probed once per setting; the first candidate job run
    with less than all of it logs a warning saying what is missing."""
    key = os.environ.get("TRITONDX_SANDBOX", "").strip().lower()
    if os.environ.get("TRITONDX_NO_NETNS", "") == "1":
        key = "none"
    key = key if key in _MECHANISMS else ""
    with _ISOLATION_LOCK:
        if key not in _ISOLATION:
            _ISOLATION[key] = _probe_isolation(key)
        return _ISOLATION[key]


def _works(mechanism: str) -> bool:
    """Whether a job under ``mechanism`` writes its scratch folder and nothing else."""
    if mechanism in ("bwrap", "unshare") and not shutil.which(mechanism):
        return False
    if mechanism == "unshare" and not shutil.which("setpriv"):
        return False
    scratch = Path(tempfile.mkdtemp(prefix="tritondx-job-probe-")).resolve()
    try:
        view = sandbox_fs.view_for(scratch, [], [], network=False)
        check = ['sh', '-c', 'touch "$1/ok" && ! touch -c / 2>/dev/null && ! touch -c /proc/sys/kernel/hostname '
                 '2>/dev/null', 'probe', str(scratch)]
        return _try(sandbox_fs.command(mechanism, view) + check) and (scratch / "ok").exists()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def make_undumpable() -> bool:
    """Linux: this process's /proc entries (environ, mem, fd) closed to other processes of its user; False
    where that cannot be asked for."""
    if _prctl is None:
        return False
    _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    return True


def _probe_isolation(key: str) -> Isolation:
    iso = Isolation()
    order = [m for m in _MECHANISMS[:2] if key in ("", m) or (key == "bwrap" and m == "unshare")]
    mech = next((m for m in order if _works(m)), None) if key != "none" else None
    if mech is not None:
        iso = Isolation(prefix=[mech], network=True, pids=True, readonly=True, mechanism=mech)
    elif key != "none" and shutil.which("unshare") and _try(["unshare", "-rn", "true"]):
        iso = Isolation(prefix=["unshare", "-rn"], network=True, mechanism="net")
    iso.note = ("TRITONDX_NO_NETNS=1 or TRITONDX_SANDBOX=none turned namespaces off" if key == "none" else
                "TRITONDX_SANDBOX=net: network namespace only" if key == "net" and iso.network else
                "neither bwrap (bubblewrap) nor unshare (user namespaces) works here" if iso.missing else
                "bwrap did not work here: unshare took its place" if key == "bwrap" and mech != "bwrap" else "")
    if not iso.pids and make_undumpable():
        # Jobs can see this process in /proc: non-dumpable, code running as the same (non-root) user
        # cannot read its environment (API keys) or memory.
        iso.note += "; this process is marked non-dumpable (its /proc environ is closed to jobs)"
    log.debug("sandbox_isolation", mechanism=iso.mechanism, missing=iso.missing, note=iso.note)
    return iso


_WARNED: set[str] = set()


def _warn_weak(iso: Isolation, kind: str) -> None:
    """Once per process, when candidate code is about to run with less isolation than wanted
    (the probe of the user's own task stays quiet: a bad task is answered with one line)."""
    if not iso.missing or kind not in ("verify", "bench") or iso.note in _WARNED:
        return
    _WARNED.add(iso.note)
    kept = "scrubbed environment, private working directory, timeout, memory limit"
    if not iso.readonly:
        kept += "; NOT kept: the job can write wherever this user can (venv, package source, $HOME, /tmp)"
    log.warning("sandbox_weak_isolation", missing=iso.missing, why=iso.note, kept=kept)


# Job keys naming what a job writes outside its scratch folder: a folder (all its files come back)
# or a file (only that file comes back).
WRITE_BACK = {"out_dir": "folder", "ceilings_file": "file", "progress_file": "file"}


def _job_reads(job: dict[str, Any]) -> list[str]:
    """Folders a job reads its task and candidates from."""
    reads = [job.get("task"), job.get("candidate"), job.get("instrumented")] + [v.get("path") for v in
                                                       (job.get("variants") or []) + (job.get("candidates") or [])
                                                       if isinstance(v, dict)]
    return [str(Path(r).parent) for r in reads if isinstance(r, str) and r]


def _stages(job: dict[str, Any], scratch: Path) -> list[sandbox_fs.Stage]:
    stages = []
    for key, what in WRITE_BACK.items():
        value = job.get(key)
        if isinstance(value, str) and value:
            p = Path(value).resolve()
            dest, names = (p, None) if what == "folder" else (p.parent, [p.name])
            stages.append(sandbox_fs.make_stage(scratch, len(stages), dest, names))
    return stages


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
    cache_dir: str | Path | None = None,
) -> JobResult:
    """Run one worker job; never raises for anything the job does. ``gpu_lock``: hand the job
    descriptors of the batch's device lock (``tools/exec/gpulock.py``), which it takes around its device
    work; without a lock directory this changes nothing. ``network``: keep the host's network
    (everything else stays isolated). ``cache_dir``: a folder the job may write and that is kept
    (its Triton cache, ``TRITON_CACHE_DIR``); without it the job's caches live in its scratch folder
    and go with it. Only jobs that trust each other may share one: any of them can write it."""
    if gpu_lock:
        from tritondx.tools.exec.gpulock import job_lock_fds
        with job_lock_fds() as (fds, lock_env):
            return _run_job(job, timeout, python, {**(env or {}), **lock_env}, memory_bytes, network, fds,
                            cache_dir)
    return _run_job(job, timeout, python, env, memory_bytes, network, (), cache_dir)


class Launch(BaseModel):
    """How one job is started: its command, environment and scratch folder, what it writes back."""

    model_config = {"arbitrary_types_allowed": True}
    cmd: list[str]
    env: dict[str, str]
    scratch: Path
    stages: list[Any] = []
    iso: Isolation


def prepare(job: dict[str, Any], argv: list[str], python: str | None, env: dict[str, str] | None,
            network: bool = False, cache_dir: str | Path | None = None, wrap: list[str] | None = None,
            reads: list[str] | None = None) -> Launch:
    """A job's command (``python -m tritondx.tools.exec.worker`` + ``argv``) inside the sandbox, its
    scrubbed environment and fresh scratch folder (its cwd, HOME, TMPDIR; ``job.json`` written there).
    ``wrap``: a command put in front of the worker inside the sandbox (a profiler: ``ncu ... python -m ...``),
    so that what it starts has the job's view too; ``reads``: more folders the job reads (the wrapper's)."""
    scratch = Path(tempfile.mkdtemp(prefix="tritondx-job-")).resolve()
    (scratch / "job.json").write_text(json.dumps(job))
    python = python or sys.executable
    # file names in ``argv`` are the scratch folder's; options stay as they are
    cmd = [*(wrap or []), python, "-m", "tritondx.tools.exec.worker",
           *(a if a.startswith("-") else str(scratch / a) for a in argv)]
    job_env = scrubbed_env(env)
    job_env["HOME"] = job_env["TMPDIR"] = str(scratch)  # ~/.triton, ~/.nv, ~/.cache, tempfile: all in scratch
    cache = Path(cache_dir).resolve() if cache_dir else scratch / ".triton-cache"
    cache.mkdir(parents=True, exist_ok=True)
    job_env["TRITON_CACHE_DIR"] = str(cache)
    iso = isolation()
    _warn_weak(iso, str(job.get("kind")))
    job_env[SANDBOXED_JOB_ENV] = "1" if iso.readonly else "0"
    stages: list[sandbox_fs.Stage] = []
    if iso.readonly:
        stages = _stages(job, scratch)
        writes = [s.bind() for s in stages] + ([sandbox_fs.Bind(src=str(cache), dest=str(cache), writable=True)]
                                               if cache_dir else [])
        reads = sandbox_fs.read_paths(python, job_env, _job_reads(job) + list(reads or []))
        cmd = sandbox_fs.command(iso.mechanism, sandbox_fs.view_for(scratch, reads, writes, network)) + cmd
    elif not network:
        cmd = iso.prefix + cmd
    return Launch(cmd=cmd, env=job_env, scratch=scratch, stages=stages, iso=iso)


def start(launch: Launch, stdout: Any, stderr: Any, pass_fds: tuple[int, ...] = (),
          memory_bytes: int | None = None, text: bool = False) -> subprocess.Popen:
    """Start a prepared job, the one place a sandboxed job is started (``run_job``, ``server.JobServer``, ncu's
    session): in its scratch folder with its environment, its own session (``kill``), the parent-death signal and
    the lifeline, ``memory_bytes`` as its address-space limit, no core dumps, ``pass_fds`` handed over (lock, gate
    and request/answer pipes); stdin closed. ``text``: its output pipes (``subprocess.PIPE``) read as text, bytes
    that do not decode replaced."""
    lifeline = _lifeline_fd()
    launch.env[LIFELINE_ENV] = str(lifeline)
    return subprocess.Popen(launch.cmd, cwd=launch.scratch, env=launch.env, stdout=stdout, stderr=stderr,
                            stdin=subprocess.DEVNULL, pass_fds=(lifeline, *pass_fds),
                            preexec_fn=_limits(memory_bytes), text=text, errors="replace" if text else None)


def kill(proc: subprocess.Popen, iso: Isolation) -> None:
    """End a started job and everything it started (a PID namespace ends with its first process; without one, the
    job's session)."""
    if not iso.pids:
        _kill_group(proc.pid)
    proc.kill()
    proc.wait()


def bwrap_returncode(iso: Isolation, returncode: int | None) -> int | None:
    """bwrap exits 128+N for a job killed by signal N: say it as Popen does (-N)."""
    if iso.readonly and iso.mechanism == "bwrap" and returncode is not None and 128 < returncode <= 128 + 64:
        return 128 - returncode
    return returncode


def _run_job(job: dict[str, Any], timeout: float, python: str | None, env: dict[str, str] | None,
             memory_bytes: int | None, network: bool, lock_fds: tuple[int, ...],
             cache_dir: str | Path | None = None) -> JobResult:
    launch = prepare(job, ["job.json", "result.json"], python, env, network, cache_dir)
    scratch, stages, iso = launch.scratch, launch.stages, launch.iso
    result_file = scratch / "result.json"
    t0 = time.monotonic()
    proc = start(launch, subprocess.PIPE, subprocess.PIPE, lock_fds, memory_bytes, text=True)
    out, err, timed_out = _communicate(proc, timeout)
    # it has ended (``_communicate`` waited for it); without a PID namespace, whatever stayed in its session
    kill(proc, iso)
    seconds = time.monotonic() - t0
    returncode = bwrap_returncode(iso, proc.returncode)
    stderr = (err or "") + (out or "")[-1000:]
    kind = classify(returncode, stderr, timed_out)
    result = None
    if result_file.is_file() and not result_file.is_symlink():
        try:
            result = json.loads(result_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            result = None
    if kind == "ok" and result is None:
        kind = "no_result"
    message = ""
    if kind != "ok":
        message = _one_line(kind, stderr, timeout)
        if kind == "no_result":
            message = (f"no_result: the job exited (code {returncode}) without writing a result "
                       "(os._exit() or sys.exit() in task code?)")
    if sandbox_fs.SETUP_FAILED in stderr:
        log.warning("sandbox_setup_failed", line=next(ln for ln in stderr.splitlines() if sandbox_fs.SETUP_FAILED in ln))
    for st in stages:
        sandbox_fs.copy_back(st)
    shutil.rmtree(scratch, ignore_errors=True)
    log.debug("job_done", job=job.get("kind"), outcome=kind, seconds=round(seconds, 2))
    return JobResult(kind=kind, returncode=returncode, seconds=seconds, result=result, message=message,
                     stderr_tail=stderr[-STDERR_KEEP:])


# How long the job's output pipes are read after its process has ended: a process it started (and
# that escaped its process group) may hold them; only without a PID namespace can one outlive the job.
PIPE_GRACE_S = 2.0


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _communicate(proc: subprocess.Popen, timeout: float) -> tuple[str, str, bool]:
    """(stdout, stderr, timed_out): the job's output until its pipes close, the job killed (its process
    group) at ``timeout``; once it has ended, at most ``PIPE_GRACE_S`` more of reading."""
    deadline = time.monotonic() + timeout
    ended_at: float | None = None
    timed_out = False
    while True:
        now = time.monotonic()
        wait = max(0.05, min(1.0, deadline - now)) if ended_at is None else PIPE_GRACE_S
        try:
            out, err = proc.communicate(timeout=wait)
            return out or "", err or "", timed_out
        except subprocess.TimeoutExpired as exc:
            now = time.monotonic()
            if ended_at is not None:
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                proc.wait()
                return _text(exc.output), _text(exc.stderr), timed_out
            if proc.poll() is not None:
                ended_at = now
            elif now >= deadline:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
                ended_at = now


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _one_line(kind: FailureKind, stderr: str, timeout: float) -> str:
    if kind == "timeout":
        return f"job did not finish within {timeout:.0f} s and was killed"
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "(no output)"
    return f"{kind}: {last[:300]}"
