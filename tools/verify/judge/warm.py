"""Warm runners, judge side: one zygote (``zygote.py``) per judge slot forks a fresh runner per candidate.

A cold runner (``spawn.RunnerProcess``) starts Python and imports torch and Triton for every
candidate: seconds each, most of a CPU verification. The zygote is started the same way, once, and
forks a child per candidate, one at a time; the child speaks the runner's protocol on pipes the
judge made (handed over with SCM_RIGHTS), so ``ForkedRunner`` is used exactly like a
``RunnerProcess``. What stops one candidate from leaving anything for the next is in ``zygote.py``;
where the zygote cannot guarantee it (a writable mount it does not own), it says so at start and
the judge uses cold runners (``runner_for``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from tritondx.tools.verify.judge.spawn import RUNNER_PY, RunnerDied, RunnerProcess, answer_device, runner_hello

log = structlog.get_logger(__name__)

ZYGOTE_PY = RUNNER_PY.with_name("zygote.py")
#: ``TRITONDX_WARM_RUNNERS=0`` turns warm runners off (every candidate gets a cold runner)
WARM_ENV = "TRITONDX_WARM_RUNNERS"


class ZygoteEnded(RunnerDied):
    """The warm runner was gone when asked to fork (it exits when a child changed what the next one
    would find): the candidate has not run; it gets a cold runner."""


class Zygote:
    """One warm runner process; ``fork`` gives a ``ForkedRunner`` (one at a time)."""

    def __init__(self, device: str, hide: list[str]) -> None:
        self.ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lock = threading.Lock()
        self.device = device
        fd = child.detach()  # RunnerProcess hands it to the zygote and closes it here
        try:
            self.proc = RunnerProcess(None, device, [], hide, script=ZYGOTE_PY, extra_fds=(fd,),
                                      hello={"zygote": True, "device": device})
        except BaseException:
            self.ctl.close()
            raise
        self.ok = isinstance(self.proc.hello, dict) and bool(self.proc.hello.get("ok"))
        self.why = "" if self.ok else str((self.proc.hello or {}).get("why", "no answer"))[:300]
        #: it works in mounts it shares with the judge job (``zygote.Snapshots``): after each child it
        #: removes whatever is new there, so nothing else of the job may run a runner meanwhile
        self.shared = self.ok and bool(self.proc.hello.get("shared"))
        self._buf = b""

    def request(self, msg: dict[str, Any], fds: list[int] = ()) -> dict[str, Any]:
        with self.lock:
            data = json.dumps(msg).encode() + b"\n"
            if fds:
                socket.send_fds(self.ctl, [data], list(fds))
            else:
                self.ctl.sendall(data)
            while b"\n" not in self._buf:
                chunk = self.ctl.recv(65536)
                if not chunk:
                    raise RunnerDied("crashed", "the warm runner ended")
                self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            return json.loads(line)

    def snap(self) -> bool:
        """Between a judge server's requests (no child running): a zygote that works in mounts it shares
        with the judge (``shared``) records them again, so that files the server added or removed since
        (its next request's candidates, the last one's gone) are neither deleted after the next child nor
        taken for a child's doing. False when the zygote is gone."""
        try:
            return bool(self.request({"op": "snap"}).get("ok"))
        except (RunnerDied, OSError, ValueError):
            return False

    def fork(self, candidate: str, allowed_ops: list[str], answer_cap: int = 1 << 34,
             flip: bool = False) -> "ForkedRunner":
        return ForkedRunner(self, candidate, allowed_ops, answer_cap, flip)

    def close(self) -> None:
        try:
            self.ctl.close()
        finally:
            self.proc.close()


class ForkedRunner(RunnerProcess):
    """A runner forked by a ``Zygote``: the same protocol and answers as a cold ``RunnerProcess``."""

    def __init__(self, zygote: Zygote, candidate: str, allowed_ops: list[str], answer_cap: int,
                 flip: bool = False) -> None:
        self.zygote = zygote
        self.dir = Path(tempfile.mkdtemp(prefix="tritondx-runner-"))
        self.source = Path(candidate).read_text()
        self.answer_cap = answer_cap
        self.answer_device = answer_device(zygote.device)
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        ev_r, ev_w = os.pipe()
        from tritondx.tools.verify.runner import wire   # here, not at import: prestart.py starts zygotes before torch
        for fd in (req_w, ans_w):
            wire.widen_pipe(fd)
        self.stderr_path = Path(tempfile.mkstemp(prefix="tritondx-runner-err-", dir=self.dir)[1])
        self._stderr = open(self.stderr_path, "w+b")  # read back through this descriptor (stderr_tail)
        try:
            reply = zygote.request({"op": "fork"}, [req_r, ans_w, ev_w, self._stderr.fileno()])
        except (OSError, ValueError, RunnerDied) as exc:
            self._stderr.close()
            os.close(req_w)
            os.close(ans_r)
            os.close(ev_r)
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)
            raise ZygoteEnded("crashed", f"the warm runner ended before forking ({exc})") from None
        finally:
            for fd in (req_r, ans_w, ev_w):
                os.close(fd)
        self.pid = reply.get("pid")
        self.rc: int | None = None
        self.req = os.fdopen(req_w, "wb")
        self.ans = os.fdopen(ans_r, "rb")
        self.evidence: list[str] = []
        self._ev = threading.Thread(target=self._drain, args=(ev_r,), daemon=True)
        self._ev.start()
        if not self.pid:
            self.req.close()
            raise RunnerDied("error", f"the warm runner did not fork: {reply.get('error', reply)}")
        self.hello = self._ask(runner_hello(zygote.device, allowed_ops, self.source, flip))

    def _end(self, op: str, timeout: float) -> int | None:
        if self.rc is None:
            try:
                self.rc = self.zygote.request({"op": op, "timeout": timeout}).get("rc")
            except (OSError, RunnerDied, ValueError):
                self.rc = None
        return self.rc

    def _exit_code(self, timeout: float) -> int | None:
        return self._end("wait", timeout)

    def close(self) -> list[str]:
        """End the child and everything it started (the zygote kills and cleans up after it)."""
        try:
            self.req.close()
        except OSError:
            pass
        if self._end("wait", 5) is None:
            self._end("kill", 5)
        self._ev.join(timeout=5)
        self.ans.close()
        self._stderr.close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.evidence


class RunnerPool:
    """Runners for the candidates of one judge job: forked by a zygote where it is safe, else cold.

    One zygote starts with the pool; more, up to ``slots``, as candidates run side by side (``runner``): a second
    zygote costs a Python, torch and Triton start (seconds of CPU), the same as the cold runner it replaces,
    and a round of one candidate, or a job whose candidates run one at a time, never uses it. Every zygote is
    started by the pool's own thread, which lives until ``close`` (a zygote dies with the thread that started
    it: parent-death signal)."""

    def __init__(self, device: str, hide: list[str], slots: int = 1) -> None:
        self.device, self.hide = device, hide
        self.free: list[Zygote] = []
        self.lock = threading.Lock()
        self.why_cold = ""
        self.forked = 0
        self.slots, self.started = max(1, slots), 0
        self._starter: ThreadPoolExecutor | None = None
        if os.environ.get(WARM_ENV, "1") == "0":
            self.why_cold = f"{WARM_ENV}=0"
            return
        from tritondx.tools.exec.sandbox import SANDBOXED_JOB_ENV
        if os.environ.get(SANDBOXED_JOB_ENV) == "0":
            # this judge job has no read-only sandbox around it (run_job says so): a zygote's view is then
            # the host's /tmp, and its clean-up after each child (Snapshots.restore) removed files other
            # runners had made there meanwhile (the contract's original runner: "candidate.py: No such
            # file", CI dry run 2026-12-01)
            self.why_cold = "the judge job has no read-only sandbox: a warm runner's clean-up would reach the host's /tmp"
        else:
            self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-zygote")
            self.started = 1
            z = self._start()
            if z is not None:
                self.free.append(z)
                if z.shared:  # one at a time: a second runner's files would be removed under it
                    self.slots = 1
        if self.why_cold:
            log.info("warm_runner_off", why=self.why_cold)

    def _start(self) -> Zygote | None:
        """A new zygote, or None (``why_cold`` says why: no zygote starts after that)."""
        try:
            z = self._starter.submit(Zygote, self.device, self.hide).result()
        except Exception as exc:  # noqa: BLE001 - no warm runner: cold ones, as before
            self.why_cold = f"the warm runner did not start: {exc}"
            return None
        if not z.ok:
            self.why_cold = z.why
            z.close()
            return None
        return z

    def refill(self) -> None:
        """Zygotes up to the number started again (one a candidate ended is replaced; a judge server between
        requests)."""
        while not self.why_cold and len(self.free) < self.started and not self.shared:
            z = self._start()
            if z is None:
                return
            self.free.append(z)

    @property
    def shared(self) -> bool:
        """True when the judge must run one candidate at a time (see ``Zygote.shared``)."""
        return any(z.shared for z in self.free)

    @property
    def warm(self) -> bool:
        return self.forked > 0

    def runner(self, candidate: str, allowed_ops: list[str], flip: bool = False) -> tuple[RunnerProcess, Zygote | None]:
        """A runner for ``candidate`` and the zygote it came from (give it back with ``release``);
        ``flip``: see ``RunnerProcess``."""
        with self.lock:
            z = self.free.pop() if self.free else None
            grow = z is None and not self.why_cold and 0 < self.started < self.slots
            self.started += grow
        if grow:   # candidates side by side: one more zygote, kept for the later ones
            z = self._start()
        if z is None:
            return RunnerProcess(candidate, self.device, allowed_ops, hide=self.hide, flip=flip), None
        try:
            runner = z.fork(candidate, allowed_ops, flip=flip)
            self.forked += 1
            return runner, z
        except ZygoteEnded as exc:
            z.close()
            log.info("warm_runner_ended", why=exc.message)
            return RunnerProcess(candidate, self.device, allowed_ops, hide=self.hide, flip=flip), None
        except BaseException:
            self.release(z)
            raise

    def release(self, z: Zygote | None) -> None:
        """Back into the pool, unless the zygote ended (a candidate may kill it: later ones go cold)."""
        if z is None:
            return
        if z.proc.proc.poll() is not None:
            z.close()
            return
        with self.lock:
            self.free.append(z)

    def snap(self) -> None:
        """Every free zygote records its shared mounts again (``Zygote.snap``); one that is gone is dropped."""
        with self.lock:
            zs, self.free = self.free, []
        for z in zs:
            if z.snap():
                self.free.append(z)
            else:
                z.close()

    def close(self) -> None:
        for z in self.free:
            z.close()
        self.free = []
        if self._starter is not None:
            self._starter.shutdown(wait=False)
