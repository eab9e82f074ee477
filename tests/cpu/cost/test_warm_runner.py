"""Warm runners (tools/verify/warm.py, zygote.py): one process imports torch and Triton once and forks
a fresh runner per candidate; nothing a candidate leaves is visible to the next one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritondx.tools.verify.warm import Zygote

# Candidate A, at import: leaves a file wherever it can write, a process that keeps running, a System V
# shared-memory segment and a module-level mark, and says where it lives.
LEAVER = '''
import ctypes, os, subprocess, sys, tempfile
left = []
for d in (os.getcwd(), os.environ.get("HOME", ""), tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp",
          os.path.expanduser("~/.cache"), {repo!r}):
    try:
        with open(os.path.join(d, "tritondx_leftover_{tag}"), "w") as f:
            f.write("x")
        left.append(d)
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # tritondx_leftover_{tag}"],
                 start_new_session=True)
libc = ctypes.CDLL(None)
libc.shmget(0x7D0C057, 4096, 0o1666)  # IPC_CREAT | 0666
sys.modules["tritondx_leftover_{tag}"] = sys
raise RuntimeError("LEFT " + repr(left) + " IN " + os.getcwd() + " PID " + str(os.getpid()))
'''

# Candidate B, at import: looks for all of it and reports what it found.
FINDER = '''
import ctypes, os, sys, tempfile
found = []
for d in (os.getcwd(), os.environ.get("HOME", ""), tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp",
          os.path.expanduser("~/.cache"), {repo!r}):
    if os.path.exists(os.path.join(d, "tritondx_leftover_{tag}")):
        found.append(d)
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and b"tritondx_leftover_{tag}" in open(f"/proc/{{p}}/cmdline", "rb").read():
            found.append("process " + p)
    except OSError:
        pass
if ctypes.CDLL(None).shmget(0x7D0C057, 0, 0) >= 0:
    found.append("shm segment")
if "tritondx_leftover_{tag}" in sys.modules:
    found.append("module")
raise RuntimeError("FOUND " + repr(found) + " IN " + os.getcwd() + " PID " + str(os.getpid()))
'''


@pytest.fixture
def zygote():
    z = Zygote("cpu", hide=[])
    if not z.ok:
        z.close()
        pytest.skip(f"no warm runner on this machine: {z.why}")
    yield z
    z.close()


def _hello_error(z: Zygote, path: Path) -> tuple[str, int]:
    r = z.fork(str(path), [])
    try:
        assert r.hello.get("ok") is False, r.hello
        return r.hello["error"], r.pid
    finally:
        r.close()


def test_children_are_fresh_forks_and_leave_nothing_for_the_next(zygote, tmp_path):
    tag = os.urandom(4).hex()
    repo = str(Path(__file__).resolve().parents[3])
    a = tmp_path / "leaver.py"
    a.write_text(LEAVER.format(tag=tag, repo=repo))
    b = tmp_path / "finder.py"
    b.write_text(FINDER.format(tag=tag, repo=repo))
    left, pid_a = _hello_error(zygote, a)
    assert left.startswith("RuntimeError: LEFT") and "/tmp" in left  # it could write its private places
    found, pid_b = _hello_error(zygote, b)
    assert found.startswith("RuntimeError: FOUND []"), found
    assert pid_a != pid_b and zygote.proc.proc.poll() is None  # a new child each time, one zygote
    # the host saw none of it either
    assert not any(Path(d, f"tritondx_leftover_{tag}").exists() for d in ("/tmp", "/dev/shm", "/var/tmp", repo,
                                                                            os.path.expanduser("~/.cache")))


def test_a_verdict_through_a_forked_runner(zygote, tmp_path):
    """The same protocol as a cold runner: an honest candidate's launch runs and answers."""
    here = Path(__file__).resolve().parents[1] / "verifier"
    r = zygote.fork(str(here / "tiny_axpy.py"), [])
    try:
        assert r.hello.get("ok") is True, r.hello
    finally:
        r.close()
