"""Starting the candidate's runner from the judge (trusted side).

The runner (``runner.py``, run as a script) gets a private folder where it writes the candidate's
source (sent in the first message) and nothing else, a scrubbed environment (``sandbox.scrubbed_env``: no keys, no seal), stdin from
/dev/null and three pipes: requests in, answers out, recorded ops out. Where the machine allows
namespaces (``sandbox.isolation``), it runs in its own user, network, PID and mount namespaces, with
a fresh tmpfs as /tmp (no other job's folder, result path or cache is visible) and the judge's
working folder hidden under an empty tmpfs. It stays in
the judge's process group and dies with the judge (parent-death signal); the judge is the
subreaper of everything the runner starts, and ``close()`` kills what is left.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tritondx.tools.exec.gpulock import ASIDE_AFTER_S, aside_enabled
from tritondx.tools.exec.triton_cache import AUTOTUNE_CACHE_ENV
from tritondx.tools.exec.sandbox import (ILLEGAL_ACCESS_RE, OOM_RE, SANDBOXED_JOB_ENV, Isolation, classify, isolation,
                                        scrubbed_env)
from tritondx.tools.verify.runner.zygote import PACKAGE_ROOT, topmost

# ``wire`` (torch) is imported at the first message: a round's warm runners start before the judge has
# imported torch, beside that import (``prestart.py``)

#: the runner script, in the untrusted zone (``verify/runner/``: run by path, never imported by the judge)
RUNNER_PY = Path(__file__).parents[1] / "runner" / "runner.py"
FDS_ENV = "TRITONDX_RUNNER_FDS"
#: set for a runner started under a profiler (``wrap``): it keeps the sockets and pipes the profiler's
#: injected library opened in it (runner.py ``_closable``)
PROFILED_ENV = "TRITONDX_RUNNER_PROFILED"
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
#: folders besides /tmp a runner gets empty in its mount namespace (bubblewrap gives a job writable ones)
SCRATCH_MOUNTS = ("/var/tmp", "/dev/shm", "/run")
#: the runner's own /tmp (a tmpfs in its mount namespace) and its folder there
PRIVATE_TMP_SIZE = "512m"
PRIVATE_DIR = "/tmp/tritondx-runner"
#: most recorded-op lines kept from the evidence channel (a flood only adds to what is rejected)
EVIDENCE_KEEP = 100_000


def _needed_in_tmp(env: dict[str, str]) -> list[str] | None:
    """The topmost folders under /tmp a runner imports or reads from (this checkout, the interpreter and its
    prefix, PYTHONPATH, the trusted Triton cache): bound back read-only over its fresh /tmp. None when /tmp
    itself is one (then /tmp stays, with the other jobs' folders hidden)."""
    paths = [PACKAGE_ROOT, sys.executable, sys.prefix, *env.get("PYTHONPATH", "").split(os.pathsep),
             env.get("TRITONDX_JOB_TRUSTED_CACHE", "")]
    found = set()
    for p in paths:
        if not p:
            continue
        for q in {os.path.abspath(p), os.path.realpath(p)}:
            if q == "/tmp":
                return None
            if q.startswith("/tmp/") and os.path.exists(q):
                found.add(q if os.path.isdir(q) else os.path.dirname(q))
    return topmost(list(found))


def _needs_host_tmp(env: dict[str, str]) -> bool:
    """True when /tmp itself is something the runner needs (``_needed_in_tmp``)."""
    return _needed_in_tmp(env) is None


def _prctl(option: int, arg: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass


def become_subreaper() -> None:
    """Orphans of the runner (a double-forked daemon) become the judge's children, so close() finds them."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


#: the runners this process started and has not closed yet (each a direct child): a runner's close()
#: ends the orphans its candidate left (reparented to us, the subreaper), never another live runner
#: (a round's other candidates, a warm runner's zygote, the original's runner: contract.py)
_LIVE_RUNNERS: set[int] = set()


#: a runner's compile notes (``runner.CompileNotes``: it tells a compile that runs longer than
#: ``gpulock.ASIDE_AFTER_S``)
COMPILING, COMPILED, ANSWERING = {"note": "compiling"}, {"note": "compiled"}, {"note": "answering"}


class RunnerDied(Exception):
    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message
        super().__init__(f"{kind}: {message}")


#: the runner's own namespaces (user, mount, PID, network): its mount script needs a mount namespace
#: it may mount in, which the job sandbox's bwrap/unshare views do not give (their prefix is only a marker)
RUNNER_NAMESPACES = ["unshare", "-rn", "--pid", "--fork", "--kill-child", "--mount-proc"]
#: the same inside a read-only sandboxed job (a judge job under bubblewrap), less the PID namespace: the kernel
#: refuses a new proc mount in a mount namespace where a proc mount is partly hidden (bubblewrap's read-only
#: /proc/sys and /proc/bus binds), and CUDA does not start in a PID namespace whose /proc is not its own
#: (cudaGetDeviceCount: error 304, measured on the H200 on 2026-12-02, bench/scripts/nested_cuda_probe.sh and
#: bench/results/cost_h200_20261202b). So the runner keeps the job's PID namespace and /proc (its /proc/sys
#: read-only and locked: a child user namespace cannot remount or unmount it): it lists the judge job's processes;
#: the judge is non-dumpable and in the parent user namespace, so its /proc entries (environ, memory, fds) stay
#: closed, but the runner may signal the job's processes (the same user): a stopped or killed judge or runner gives
#: an error verdict; a stopped competitor while it is timed is what the hardware check's ncu times (kernel
#: durations, a process of its own) are compared against. Orphans it leaves are reparented to the judge (a
#: subreaper) or to its zygote and killed when it ends (``RunnerProcess.close``, ``zygote._kill_leftovers``).
NESTED_RUNNER_NAMESPACES = ["unshare", "-rmn", "--ipc"]
#: "0": runners inside a sandboxed job get no namespaces of their own (as before 2026-12-02: the warm runner then
#: shares the job's, snapshots its writable mounts and runs one candidate at a time); passed to jobs (TRITONDX_JOB_)
NESTED_ENV = "TRITONDX_JOB_NESTED_RUNNERS"
_NESTED: dict[str, bool] = {}


def _nested_works() -> bool:
    """Whether this process (a job inside a read-only sandbox) can give a runner its own user, mount, network and
    PID namespaces and mount a tmpfs there (probed once)."""
    if "ok" not in _NESTED:
        try:
            _NESTED["ok"] = shutil.which("unshare") is not None and subprocess.run(
                NESTED_RUNNER_NAMESPACES + ["sh", "-c", "mount -t tmpfs -o size=1m tmpfs /tmp"],
                capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _NESTED["ok"] = False
    return _NESTED["ok"]


def runner_prefix(iso: Isolation) -> tuple[list[str], bool]:
    """(the prefix that gives a runner its namespaces, whether it gets a mount namespace of its own with the
    mount script: a fresh /tmp, the judge's folder hidden). A full set where the sandbox found user namespaces
    working; inside a read-only sandboxed job (``SANDBOXED_JOB_ENV``) the nested set where the kernel allows it
    (bubblewrap jobs run as a non-root user for this: ``sandbox_fs.JOB_UID``); else the network namespace alone
    where only that works, else none."""
    if iso.mechanism in ("bwrap", "unshare"):
        return list(RUNNER_NAMESPACES), iso.readonly
    if os.environ.get(SANDBOXED_JOB_ENV) == "1" and os.environ.get(NESTED_ENV, "1") != "0" and _nested_works():
        return list(NESTED_RUNNER_NAMESPACES), True
    return list(iso.prefix), False


def answer_device(device: str) -> str:
    """Where the judge rebuilds a runner's answers: on its CUDA device when it checks one (the outputs
    are compared there, and a benchmark-size output never lands in host memory twice), else the host."""
    return device if device.startswith("cuda") else "cpu"


def runner_hello(device: str, allowed_ops: list[str], source: str, flip: bool) -> dict[str, Any]:
    """A runner's first message: its device, the ops it may call, the candidate's source, whether flipped, and on a
    GPU that its calls tell their Triton compiles (``runner.CompileNotes``: the judge steps aside from the device)."""
    return {"device": device, "allowed_ops": allowed_ops, "source": source, **({"flip": True} if flip else {}),
            **({"compile_notes": ASIDE_AFTER_S} if device.startswith("cuda") and aside_enabled() else {})}


class RunnerProcess:
    """One candidate runner for the whole judge job (started once, not per shape)."""

    def __init__(self, candidate: str | None, device: str, allowed_ops: list[str], hide: list[str],
                 answer_cap: int = 1 << 34, wrap: list[str] | None = None, script: Path = RUNNER_PY,
                 extra_fds: tuple[int, ...] = (), hello: dict[str, Any] | None = None, flip: bool = False,
                 preload: bool = False, cache_dir: Path | None = None) -> None:
        """``wrap``: a command put in front of the runner (ncu). A wrapped runner gets no namespaces:
        a profiler's injected threads make ``unshare`` of a user namespace fail (EINVAL, seen with
        ncu 2025.3 on the H200); it keeps the scrubbed environment, its private folder and the
        parent-death signal. ``script``, ``extra_fds``, ``hello``: what a warm runner (``warm.py``)
        starts instead: its script, descriptors it gets after the three pipes, its first message.
        ``flip``: the candidate is the judge's flipped source (``flip.py``): device queries answer as on a GPU.
        ``preload``: the runner only imports torch and Triton now (no CUDA call, no candidate code) and the
        hello is sent by ``begin()``: a runner under ncu starts outside the profiler lock (``hwcheck.py``).
        ``cache_dir``: its Triton cache (compiles and autotuning results, ``TRITON_CACHE_AUTOTUNING``) in that folder,
        which outlives it: a later runner of the same source in the same job starts from it (``hwcheck._Prewarm``).
        Such a runner gets no namespaces of its own, as a wrapped one (a private /tmp would take its compiles with
        it); the job's sandbox still confines it."""
        self.dir = Path(tempfile.mkdtemp(prefix="tritondx-runner-"))
        self.source = Path(candidate).read_text() if candidate else ""
        self.answer_cap = answer_cap
        self.answer_device = answer_device(device)
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        ev_r, ev_w = os.pipe()
        fds = (req_r, ans_w, ev_w, *extra_fds)
        # its own Triton cache: where a runner inside a job gets no namespace of its own (no nested user namespace),
        # the judge's TRITON_CACHE_DIR (passed on like every TRITON_ name) was one folder for every cold runner
        env = scrubbed_env({"HOME": str(self.dir), "TRITON_CACHE_DIR": str(cache_dir or self.dir / ".triton"),
                            FDS_ENV: ",".join(map(str, fds)), "OMP_NUM_THREADS": "1",
                            **({PROFILED_ENV: "1"} if wrap else {}),
                            **({AUTOTUNE_CACHE_ENV: "1"} if cache_dir else {})})
        cmd = [sys.executable, "-P", str(script)]
        prefix, own_mounts = runner_prefix(isolation()) if not (wrap or cache_dir) else ([], False)
        if own_mounts:  # a mount namespace: a fresh /tmp (or other jobs' folders hidden), the judge's hidden
            if _needs_host_tmp(env):
                hide = hide + [str(d) for d in Path(tempfile.gettempdir()).glob("tritondx-[jr]*-*")]
            # never a folder this runner's own folder is in (in an unsandboxed judge job the runners' folders
            # are inside the judge's hidden cwd: hiding it took the runner's cwd away)
            hide = [h for h in hide if Path(h) != self.dir and Path(h) not in self.dir.parents]
            mounts = "".join(f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(h)} 2>/dev/null; " for h in hide)
            # the other folders any process may write (a second runner of the same judge job writes them too)
            mounts += "".join(f"[ -d {d} ] && mount -t tmpfs -o size={PRIVATE_TMP_SIZE} tmpfs {d} 2>/dev/null; "
                              for d in SCRATCH_MOUNTS)
            keep = _needed_in_tmp(env)
            if keep is not None:
                # what it imports from under /tmp waits on its fresh /dev/shm while /tmp is replaced, then moves back
                held = [f"/dev/shm/.tdx-keep{i}" for i in range(len(keep))]
                mounts += "".join(f"mkdir -p {h} && mount --rbind {shlex.quote(k)} {h} || exit 97; "
                                  for k, h in zip(keep, held))
                mounts += f"mount -t tmpfs -o size={PRIVATE_TMP_SIZE} tmpfs /tmp || exit 97; "
                mounts += "".join(f"mkdir -p {shlex.quote(k)} && mount --move {h} {shlex.quote(k)} && rmdir {h} "
                                  f"|| exit 97; " for k, h in zip(keep, held))
                # set inside the namespace: a wrapper outside it (ncu) keeps the host's TMPDIR
                mounts += (f"mkdir -p {PRIVATE_DIR} && cd {PRIVATE_DIR} || exit 97; export HOME={PRIVATE_DIR} "
                           f"TMPDIR={PRIVATE_DIR} TRITON_CACHE_DIR={PRIVATE_DIR}/.triton; ")
            cmd = ["sh", "-c", mounts + 'exec "$@"', "sh"] + cmd
        cmd = (wrap or []) + prefix + cmd
        self.stderr_path = Path(tempfile.mkstemp(prefix="tritondx-runner-err-")[1])
        self._stderr = open(self.stderr_path, "w+b")  # read back through this descriptor (stderr_tail)
        parent = os.getpid()

        def preexec() -> None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(137)

        self.proc = subprocess.Popen(cmd, cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=self._stderr,
                                     stderr=self._stderr, pass_fds=fds, preexec_fn=preexec)
        _LIVE_RUNNERS.add(self.proc.pid)
        # widened after the start (either end sizes the pipe): wire imports torch, which a warm runner's
        # start must not wait for (prestart.py)
        from tritondx.tools.verify.runner import wire
        for fd in (req_w, ans_r):
            wire.widen_pipe(fd)
        for fd in fds:
            os.close(fd)
        self.req = os.fdopen(req_w, "wb")
        self.ans = os.fdopen(ans_r, "rb")
        self.evidence: list[str] = []
        self._ev = threading.Thread(target=self._drain, args=(ev_r,), daemon=True)
        self._ev.start()
        self._hello_msg = hello or runner_hello(device, allowed_ops, self.source, flip)
        self.hello: Any = {}
        self._begun = False
        self.preloaded: dict[str, Any] | None = None
        if preload:
            self.preloaded = self._ask({"op": "preload"})
        else:
            self.begin()

    @property
    def seconds(self) -> dict[str, float]:
        """Seconds of this runner's calls the judge spent with the device given back: ``compiling`` (compile notes)
        and ``answers`` (announced answers' bytes crossing the pipe)."""
        return self.__dict__.setdefault("_seconds", {"compiling": 0.0, "answers": 0.0})

    def begin(self) -> dict[str, Any]:
        """Send the hello (the candidate's source: the runner imports it) and keep the answer; done by the
        constructor unless the runner was started with ``preload``."""
        if not self._begun:
            self._begun = True
            self.hello = self._ask(self._hello_msg)
        return self.hello

    def _drain(self, fd: int) -> None:
        buf = b""
        with os.fdopen(fd, "rb") as f:
            while True:
                chunk = f.read1(65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                room = EVIDENCE_KEEP - len(self.evidence)
                if room > 0:
                    self.evidence += [ln.decode(errors="replace")[:80] for ln in lines[:room]]

    def _ask(self, msg: dict[str, Any]) -> Any:
        """Send ``msg`` and return the answer. Meanwhile a call's compile notes (``runner.CompileNotes``): the device
        this thread holds for the call is given back while the runner compiles and taken again before it goes on
        (``gpulock.step_aside``); it is held again when the answer comes, whatever the runner sent. An announced
        answer (``runner.ANSWER_NOTE_BYTES``) is read off the pipe aside and rebuilt on the device under the hold."""
        from tritondx.tools.exec import gpulock
        from tritondx.tools.verify.runner import wire
        try:
            wire.send(self.req, msg)
            t_note = time.monotonic()
            while True:
                ans = wire.recv(self.ans, cap=self.answer_cap, device=self.answer_device)
                if ans == COMPILING:
                    gpulock.step_aside()
                    t_note = time.monotonic()
                elif ans == COMPILED:
                    gpulock.step_back()
                    self.seconds["compiling"] += time.monotonic() - t_note
                    wire.send(self.req, {"op": "go"})
                elif ans == ANSWERING:   # the answer's bytes, device given back; rebuilt on the device under it
                    t_note = time.monotonic()
                    gpulock.step_aside()
                    body, blobs = wire.recv_raw(self.ans, cap=self.answer_cap)
                    gpulock.step_back()
                    self.seconds["answers"] += time.monotonic() - t_note
                    return wire.decode(body, blobs, self.answer_device)
                else:
                    return ans
        except (EOFError, BrokenPipeError, wire.WireError, ValueError, OSError) as exc:
            raise self._died(exc) from None
        finally:
            gpulock.step_back()

    def _exit_code(self, timeout: float) -> int | None:
        """The runner's exit status, waiting up to ``timeout`` s (None: still running)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def _died(self, exc: BaseException) -> RunnerDied:
        rc = self._exit_code(10)
        tail = self.stderr_tail()
        if rc is None:
            return RunnerDied("error", f"the candidate's runner broke the protocol ({exc})")
        kind = classify(rc, tail, False)
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
        # the line that names the fault (a CUDA error is followed by torch's hints), else the last
        last = next((ln for ln in reversed(lines) if ILLEGAL_ACCESS_RE.search(ln) or OOM_RE.search(ln)),
                    lines[-1] if lines else "(no output)")
        if kind == "ok":
            kind = "no_result"
            return RunnerDied(kind, f"the candidate's process exited (code 0) without answering "
                                    f"(os._exit() or sys.exit() in candidate code?)")
        return RunnerDied(kind, f"the candidate's process ended (code {rc}): {last[:300]}")

    def stage(self, args: list) -> int:
        """Hand a call's inputs to a preloaded runner before its hello (it keeps them in host memory, no CUDA):
        the hardware check sends them before the profiler lock is taken and its calls name them (``call(staged=)``).
        Returns their index."""
        if self.preloaded is None or self._begun:
            raise RuntimeError("inputs are staged only in a preloaded runner, before its hello")
        ans = self._ask({"op": "stage", "args": args})
        if not (isinstance(ans, dict) and ans.get("ok") and isinstance(ans.get("staged"), int)):
            raise self._died(ValueError(f"staging answered {str(ans)[:120]}"))
        return ans["staged"] - 1

    def stage_case(self, args: list) -> None:
        """Hand a check case's inputs to the runner (after its hello): it keeps their bytes in host memory, in place of
        the previous case's, and every ``call(staged="case")`` rebuilds fresh tensors from them on its device (into
        the same memory as a sent call's, ``wire.recv``'s pool). The judge sends them once per case, with the device
        given back (``judge.candidate.Judge._group``), instead of once per call under the hold."""
        ans = self._ask({"op": "stage_case", "args": args})
        if not (isinstance(ans, dict) and ans.get("ok") and ans.get("staged") == "case"):
            raise self._died(ValueError(f"staging a case answered {str(ans)[:120]}"))

    def call(self, args: list, skip_mask: list[bool] = (), skip_rest: bool = False, profile: bool = False,
             inputs_back: bool = True, trace: bool = False, staged: int | str | None = None) -> dict:
        """One watched call. ``profile``: no poisoning, and the CUDA profiler API brackets the call
        (what ncu measures with ``--profile-from-start off``). ``inputs_back=False``: the answer leaves the
        inputs out (a call whose input mutation nobody checks: the kernels-off call, the hardware check).
        ``trace``: the runner also answers the line trace of the candidate file (``lines``, ``positions``);
        without it, it answers none. ``staged``: the inputs are those staged under this index (``stage``), or
        ``"case"``: the case staged last (``stage_case``); ``args`` is not sent."""
        if not isinstance(trace, bool):
            raise TypeError(f"trace must be a bool, not {type(trace).__name__}")
        msg = {"op": "call", "args": args if staged is None else [], "skip_mask": list(skip_mask),
               "skip_rest": skip_rest, "profile": profile, "inputs_back": inputs_back, "trace": trace}
        if staged is not None:
            msg["staged"] = staged
        return self._ask(msg)

    def reset(self) -> None:
        self._ask({"op": "reset"})

    def stderr_tail(self, n: int = 4000) -> str:
        """The end of what the runner wrote to stderr, read through the descriptor it writes to, not the
        path: a warm runner's zygote may clean the folder up once its child has ended (seen on the H200:
        an illegal memory access read back as "(no output)" and was classified only as ``error``)."""
        try:
            self._stderr.flush()
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            return os.pread(fd, n, max(0, size - n)).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def close(self) -> list[str]:
        """End the runner and everything it started; returns the evidence channel's op lines."""
        for f in (self.req,):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _LIVE_RUNNERS.discard(self.proc.pid)
        for _ in range(20):  # orphans reparented to us (we are their subreaper)
            kids = [k for k in _children(os.getpid()) if k != self.proc.pid and k not in _LIVE_RUNNERS]
            if not kids:
                break
            for k in kids:
                try:
                    os.kill(k, signal.SIGKILL)
                    os.waitpid(k, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
            time.sleep(0.05)
        self._ev.join(timeout=5)
        self.ans.close()
        self._stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.stderr_path.unlink(missing_ok=True)
        return self.evidence
