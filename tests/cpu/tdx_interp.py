"""One warm Python per test process for the tests' own checks of task code under the Triton interpreter.

A rewrite test asks "is the rewritten kernel right" (``rewrite/conftest.py``: ``check_light``), a tune test "does
the emitted source match its reference" (``tune/test_tuner.py``). Each used to start a fresh interpreter (Python,
torch and Triton: ~2 CPU-s of a 2-core CI machine, ~85 checks a suite). Triton decides interpreter mode when a
kernel is decorated, so the checks cannot run in the pytest process itself (whose kernels are compiled ones); they
run here instead: one child per test process with ``TRITON_INTERPRET=1`` from its start, torch and Triton
imported once. Each check runs its code as ``__main__`` would (``sys.argv``, ``sys.exit``, its stdout and stderr
captured), and afterwards the child drops the modules the check imported, restores its environment and working
folder, so a check sees what a fresh process would (installed packages and tritondx stay imported: torch registers
its operators once per process). A check that hangs past its timeout, or kills the child, is
answered as a failure and the next check gets a new child.

This is test scaffolding, not the verifier: candidates in the product are judged by the sandboxed judge
(``tools/verify``), which these tests do not replace.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from dataclasses import dataclass

_CHILD = r'''
import contextlib, io, json, os, sys, traceback
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language  # noqa: F401  (warm: every check imports them)
reply = os.fdopen(int(sys.argv[1]), "w")
#: modules a check may import and the next one keeps: installed packages (torch registers its operators once per
#: process) and tritondx's own (``tritondx`` and ``tritondx.*``)
KEEP = (sys.prefix, sys.base_prefix)
for line in sys.stdin:
    req = json.loads(line)
    mods, env, cwd, argv = set(sys.modules), dict(os.environ), os.getcwd(), list(sys.argv)
    out, err, rc = io.StringIO(), io.StringIO(), 0
    try:
        os.environ.update(req["env"])
        if req["cwd"]:
            os.chdir(req["cwd"])
        sys.argv = ["-c", *req["argv"]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(compile(req["code"], "<check>", "exec"), {"__name__": "__main__"})
            except SystemExit as e:
                if e.code is None or e.code == 0:
                    rc = 0
                elif isinstance(e.code, int):
                    rc = e.code
                else:
                    print(e.code, file=sys.stderr)
                    rc = 1
            except BaseException:
                traceback.print_exc()
                rc = 1
    finally:
        for m in set(sys.modules) - mods:   # the check's own modules (tasks, candidates, their helpers)
            f = getattr(sys.modules[m], "__file__", None)   # None: a builtin or a namespace package
            if f and not (f.startswith(KEEP) or m == "tritondx" or m.startswith("tritondx.")):
                sys.modules.pop(m, None)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = argv
    reply.write(json.dumps({"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}) + "\n")
    reply.flush()
'''


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class _Host:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.reply = None
        self.lock = threading.Lock()

    def _start(self) -> None:
        r, w = os.pipe()
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(w)], stdin=subprocess.PIPE, env=env,
                                     pass_fds=(w,), text=True, stdout=subprocess.DEVNULL)
        os.close(w)
        self.reply = os.fdopen(r, "r")

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.reply.close()
        self.proc = self.reply = None

    def run(self, code: str, argv: list[str], env: dict[str, str], cwd: str | None, timeout: float) -> Result:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._stop()
                self._start()
            try:
                self.proc.stdin.write(json.dumps({"code": code, "argv": argv, "env": env, "cwd": cwd}) + "\n")
                self.proc.stdin.flush()
            except OSError as exc:
                self._stop()
                return Result(1, "", f"the interpreter host died: {exc}")
            ready, _, _ = select.select([self.reply], [], [], timeout)
            line = self.reply.readline() if ready else ""
            if not line:
                why = f"did not finish within {timeout:.0f} s" if not ready else \
                    f"the interpreter host ended (exit {self.proc.poll()})"
                self._stop()
                return Result(1, "", why)
            d = json.loads(line)
            return Result(d["rc"], d["stdout"], d["stderr"])


_HOST = _Host()


def run_interpreted(code: str, *argv: str, env: dict[str, str] | None = None, cwd: str | None = None,
                    timeout: float = 600) -> Result:
    """Run ``code`` as a ``python -c`` program with ``argv`` under the Triton interpreter, in the warm child."""
    return _HOST.run(code, [str(a) for a in argv], dict(env or {}), cwd, timeout)
