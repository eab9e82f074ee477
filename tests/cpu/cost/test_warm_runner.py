"""Warm runners (tools/verify/judge/warm.py, zygote.py): one process imports torch and Triton once and forks
a fresh runner per candidate; nothing a candidate leaves is visible to the next one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritondx.tools.verify.judge.warm import Zygote

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


def test_what_runners_import_from_under_tmp_stays_visible_and_is_never_wiped(tmp_path, monkeypatch):
    """A venv or checkout under /tmp (a CI clone there): the zygote's fresh tmpfs over /tmp hid it, so it could not
    import Triton and every judge fell back to cold runners. What runners import from (``zygote._needed``: here a
    PYTHONPATH folder under /tmp) is bound back read-only over the tmpfs and survives the wipe between children;
    a child cannot write into it; what a child leaves beside it in /tmp is gone for the next."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "tdx_helper_mod.py").write_text("VALUE = 42\n")
    assert str(lib).startswith("/tmp/")
    monkeypatch.setenv("PYTHONPATH", str(lib))
    z = Zygote("cpu", hide=[])
    if not z.ok:
        z.close()
        pytest.skip(f"no warm runner on this machine: {z.why}")
    try:
        cand = tmp_path / "uses_helper.py"
        cand.write_text(f'''
import os, tdx_helper_mod
try:
    open(os.path.join({str(lib)!r}, "planted.py"), "w").write("x")
    wrote = "wrote"
except OSError as exc:
    wrote = type(exc).__name__
open("/tmp/tdx_left_beside", "w").write("x")
raise RuntimeError(f"HELPER {{tdx_helper_mod.VALUE}} {{wrote}} {{os.path.exists('/tmp/tdx_left_beside')}}")
''')
        first, _ = _hello_error(z, cand)
        assert "HELPER 42 OSError True" in first, first
        finder = tmp_path / "finder.py"
        finder.write_text("import os, tdx_helper_mod\n"
                          "raise RuntimeError(f\"NEXT {tdx_helper_mod.VALUE} {os.path.exists('/tmp/tdx_left_beside')}\")\n")
        second, _ = _hello_error(z, finder)
        assert "NEXT 42 False" in second, second
        assert not (lib / "planted.py").exists() and (lib / "tdx_helper_mod.py").read_text() == "VALUE = 42\n"
    finally:
        z.close()


def test_a_pool_starts_one_zygote_and_another_only_for_a_candidate_beside_the_first(monkeypatch):
    """``RunnerPool(slots=2)``: one zygote at the start; a second when a candidate asks while the first is out (then
    kept); none beyond the slots (a cold runner); ``refill`` replaces one that ended, up to the number started."""
    from tritondx.tools.exec.sandbox import SANDBOXED_JOB_ENV
    from tritondx.tools.verify.judge import warm

    started: list[object] = []

    class FakeZygote:
        ok, shared, why = True, False, ""

        def __init__(self, device, hide):
            self.proc = type("P", (), {"proc": type("Q", (), {"poll": staticmethod(lambda: None)})()})()
            started.append(self)

        def fork(self, candidate, allowed_ops, flip=False):
            return ("forked", self)

        def close(self):
            pass

    monkeypatch.setattr(warm, "Zygote", FakeZygote)
    monkeypatch.setattr(warm, "RunnerProcess", lambda *a, **k: "cold")
    monkeypatch.setenv(SANDBOXED_JOB_ENV, "1")
    monkeypatch.delenv(warm.WARM_ENV, raising=False)
    pool = warm.RunnerPool("cpu", [], slots=2)
    try:
        assert len(started) == 1
        r1, z1 = pool.runner("a.py", [])
        pool.release(z1)
        r2, z2 = pool.runner("b.py", [])   # one after the other: the same zygote
        assert z2 is z1 and len(started) == 1
        r3, z3 = pool.runner("c.py", [])   # beside b.py: a second one
        assert len(started) == 2 and z3 is started[1] and r3 == ("forked", z3)
        r4, z4 = pool.runner("d.py", [])   # beyond the slots: cold
        assert r4 == "cold" and z4 is None and len(started) == 2
        pool.release(z2)
        pool.free.clear()                   # both gone (a candidate ended them): refill starts two again
        pool.refill()
        assert len(pool.free) == 2 and len(started) == 4
    finally:
        pool.close()
