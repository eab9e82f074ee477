"""The judge server (tools/verify/judge/server.py, servers.py, exec/server.py): one sandboxed judge per
task answers every round; verdicts stay right, and nothing a candidate leaves reaches a later request."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.exec.server import JobServer
from tritondx.tools.verify.judge import seal
from tritondx.tools.verify import servers
from tritondx.tools.verify.verification import verify_round

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"

pytestmark = pytest.mark.skipif(not servers.enabled(), reason="no read-only sandbox here: no judge server")


@pytest.fixture
def task(tmp_path) -> Path:
    p = tmp_path / "task.py"
    shutil.copyfile(EXAMPLE, p)
    yield p
    servers.close_all()


def _cand(tmp_path: Path, name: str, source: str) -> dict:
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    return {"id": name, "path": str(p)}


def _serve(task: Path, **env: str) -> JobServer:
    return JobServer({"kind": "judge", "task": str(task), "device": "cpu", "slots": 1},
                     env={**get_backend("interpreter").job_env(), **env}, memory_bytes=8 << 30)


def _ask(srv: JobServer, task: Path, cands: list[dict], key: str, timeout: float = 240):
    job = {"kind": "verify", "task": str(task), "device": "cpu", "include_bench": False, "allowed_ops": [],
           "candidates": cands, "timeout_per_candidate": timeout, "parallel": 1, "scope": "full"}
    return servers.request(srv, job, key, timeout)


def test_rounds_share_one_server_and_its_verdicts_stay_right(task, tmp_path):
    backend = get_backend("interpreter")
    honest = EXAMPLE.read_text()
    wrong = honest.replace("alpha * x + y, mask=mask", "alpha * x - y, mask=mask")
    assert wrong != honest
    first = verify_round(str(task), [_cand(tmp_path, "r1c1", honest), _cand(tmp_path, "r1c2", wrong)],
                         backend, [], 240, 2)
    srv = servers.server_for(str(task), backend, 2)
    assert srv is not None and srv.requests == 1
    pid = srv.proc.pid
    second = verify_round(str(task), [_cand(tmp_path, "r2c1", wrong), _cand(tmp_path, "r2c2", honest)],
                          backend, [], 240, 2)
    assert [v.passed for v in first] == [True, False] and first[1].klass == "mismatch", first[1]
    assert [v.passed for v in second] == [False, True] and second[0].klass == "mismatch", second[0]
    again = servers.server_for(str(task), backend, 2)
    assert again is srv and again.proc.pid == pid and again.requests == 2   # no new job for round 2


def test_a_verdict_is_sealed_with_its_own_requests_key(task, tmp_path):
    srv = _serve(task)
    try:
        k1, k2 = seal.new_key(), seal.new_key()
        r = _ask(srv, task, [_cand(tmp_path, "c1", EXAMPLE.read_text())], k1)
        verdict = r.result["verdicts"]["c1"]
        assert verdict["passed"] is True
        assert seal.valid(k1, verdict) and not seal.valid(k2, verdict)
    finally:
        srv.close()


# At import (its checks then fail with this message): leaves a file wherever it can write, a process,
# a System V segment; or looks for all of that and for the seal key in any process's environment.
LEAVER = '''
import ctypes, os, subprocess, sys, tempfile
for d in (os.getcwd(), os.environ.get("HOME", ""), tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp", "/run",
          {scratch!r}, os.path.dirname({scratch!r}), os.environ.get("TRITON_CACHE_DIR", "")):
    try:
        with open(os.path.join(d, "tritondx_left_{tag}"), "w") as f:
            f.write("x")
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # tritondx_left_{tag}"], start_new_session=True)
ctypes.CDLL(None).shmget(0x7D0C058, 4096, 0o1666)
raise RuntimeError("LEFT")
'''
FINDER = '''
import ctypes, os, tempfile
found = []
for d in (os.getcwd(), os.environ.get("HOME", ""), tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp", "/run",
          {scratch!r}, os.path.dirname({scratch!r}), os.environ.get("TRITON_CACHE_DIR", "")):
    if os.path.exists(os.path.join(d, "tritondx_left_{tag}")):
        found.append(d)
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and b"tritondx_left_{tag}" in open(f"/proc/{{p}}/cmdline", "rb").read():
            found.append("process")
        if p.isdigit() and b"TRITONDX_JOB_SEAL" in open(f"/proc/{{p}}/environ", "rb").read():
            found.append("seal in environment")
    except OSError:
        pass
if ctypes.CDLL(None).shmget(0x7D0C058, 0, 0) >= 0:
    found.append("shm")
raise RuntimeError("FOUND " + repr(found))
'''


@pytest.mark.parametrize("warm", ["1", "0"])
def test_nothing_a_candidate_leaves_reaches_the_next_request(task, tmp_path, warm):
    """Cold runners too (TRITONDX_WARM_RUNNERS=0): then only the server's own clean-up stands between
    two requests (a warm runner cleans after each child itself)."""
    tag = f"{warm}{tmp_path.name[-6:]}"
    srv = _serve(task, TRITONDX_WARM_RUNNERS=warm)
    try:
        scratch = str(srv.scratch)
        r1 = _ask(srv, task, [_cand(tmp_path, "leaver", LEAVER.format(tag=tag, scratch=scratch))], seal.new_key())
        assert "LEFT" in r1.result["verdicts"]["leaver"]["error"], r1
        r2 = _ask(srv, task, [_cand(tmp_path, "finder", FINDER.format(tag=tag, scratch=scratch))], seal.new_key())
        if r2.kind != "ok":   # the server may end after a request it could not clean up after: a new one
            srv.close()
            srv = _serve(task, TRITONDX_WARM_RUNNERS=warm)
            r2 = _ask(srv, task, [_cand(tmp_path, "finder", FINDER.format(tag=tag, scratch=scratch))],
                      seal.new_key())
        assert "FOUND []" in r2.result["verdicts"]["finder"]["error"], r2.result
    finally:
        srv.close()


def test_a_request_past_its_time_ends_the_server_and_the_next_round_gets_a_new_one(task, tmp_path):
    backend = get_backend("interpreter")
    srv = servers.server_for(str(task), backend, 1)
    slow = "import time\ntime.sleep(120)\n" + EXAMPLE.read_text()
    r = _ask(srv, task, [_cand(tmp_path, "slow", slow)], seal.new_key(), timeout=15)
    assert r.kind == "timeout" and not srv.alive
    assert srv.proc.poll() is not None   # killed, not left running
    (v,) = verify_round(str(task), [_cand(tmp_path, "next", EXAMPLE.read_text())], backend, [], 240, 1)
    assert v.passed, v
    fresh = servers.server_for(str(task), backend, 1)
    assert fresh is not srv and fresh.alive


def test_in_one_judge_job_a_candidate_leaves_nothing_for_the_next_in_dev_shm_either(task, tmp_path, monkeypatch):
    """One-shot judge job, one warm runner shared with the job (bubblewrap): its snapshot must walk
    bubblewrap's /dev/shm (a folder of its /dev, while the host's /dev/shm mount point it hides is still
    listed in mountinfo: skipping it left a file there for the next candidate)."""
    monkeypatch.setenv(servers.SERVER_ENV, "0")
    tag = f"s{tmp_path.name[-6:]}"
    scratch = str(tmp_path / "none")
    leaver = _cand(tmp_path, "leaver", LEAVER.format(tag=tag, scratch=scratch))
    finder = _cand(tmp_path, "finder", FINDER.format(tag=tag, scratch=scratch))
    v1, v2 = verify_round(str(task), [leaver, finder], get_backend("interpreter"), [], 240, 1, static_policy=False)
    assert "LEFT" in v1.reason, v1
    assert "FOUND []" in v2.reason, v2


CACHE_LEAVER = """
import os
os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
open(os.path.join(os.environ["TRITON_CACHE_DIR"], "tritondx_left_{tag}"), "w").write("x")
raise RuntimeError("LEFT")
"""
CACHE_FINDER = """
import os
raise RuntimeError("FOUND " + repr(os.path.exists(os.path.join(os.environ["TRITON_CACHE_DIR"], "tritondx_left_{tag}"))))
"""


def test_cold_runners_of_one_request_share_no_triton_cache(task, tmp_path):
    """Cold runners (no warm runner, or one that ended) inside a bubblewrap job get no namespace of their own:
    each now gets its own TRITON_CACHE_DIR (it was the judge's, one folder for all: a candidate could leave a
    compiled kernel there for the next runner, the original's contract runner included)."""
    tag = f"c{tmp_path.name[-6:]}"
    srv = _serve(task, TRITONDX_WARM_RUNNERS="0")
    try:
        r = _ask(srv, task, [_cand(tmp_path, "leaver", CACHE_LEAVER.format(tag=tag)),
                             _cand(tmp_path, "finder", CACHE_FINDER.format(tag=tag))], seal.new_key())
        assert "LEFT" in r.result["verdicts"]["leaver"]["error"], r.result
        assert "FOUND False" in r.result["verdicts"]["finder"]["error"], r.result
    finally:
        srv.close()


def test_a_forked_orchestrator_starts_its_own_server_and_leaves_the_parents_alone(task):
    backend = get_backend("interpreter")
    parent = servers.server_for(str(task), backend, 1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: a server of its own (the parent's starter thread does not exist here)
        try:
            mine = servers.server_for(str(task), backend, 1)
            ok = mine is not parent and mine.owner == os.getpid() and mine.alive and not parent.alive
            servers.close_all()
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    import select
    import signal
    ready, _, _ = select.select([r], [], [], 120)
    if not ready:   # (before the fix the child hung in server_for)
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert ready and os.read(r, 1) == b"1"
    assert parent.alive and servers.server_for(str(task), backend, 1) is parent



NAMESPACES = '''
import os
own_pid_ns = os.getpid() != int(open("/proc/self/stat").read().split()[0])   # /proc is the judge job's
raise RuntimeError(f"NS pid={{own_pid_ns}} euid={{os.geteuid()}}")   # 0: root of a user namespace of its own
'''


@pytest.mark.parametrize("warm", ["1", "0"])
def test_candidates_in_a_bubblewrap_judge_job_get_namespaces_of_their_own(task, tmp_path, warm):
    """Inside a judge job under bubblewrap (run as ``sandbox_fs.JOB_UID``, not uid 0, which may not write a child
    namespace's uid_map) each runner, warm or cold, gets its own user, mount, IPC and network namespaces
    (``spawn.NESTED_RUNNER_NAMESPACES``): its uid 0 maps to the job's user; its pids are the job's (CUDA does not
    start in a PID namespace whose /proc is not its own). The warm
    runner is no longer shared with the judge job (one candidate at a time, its files snapshotted). In the job
    itself the user is JOB_UID; in a runner's own user namespace it is 0 (``unshare -r``)."""
    from tritondx.tools.exec.sandbox import isolation
    from tritondx.tools.exec.sandbox_fs import JOB_UID
    if isolation().mechanism != "bwrap":
        pytest.skip("the jobs here are not sandboxed by bubblewrap")
    srv = _serve(task, TRITONDX_WARM_RUNNERS=warm)
    try:
        r = _ask(srv, task, [_cand(tmp_path, "ns", NAMESPACES.format())], seal.new_key())
        err = r.result["verdicts"]["ns"]["error"]
        assert "NS pid=False euid=0" in err and JOB_UID != 0, r.result
        if warm == "1":
            assert r.result["runners"] == "warm (1 forked, own namespaces)", r.result
    finally:
        srv.close()


def test_with_nested_runners_off_candidates_share_the_judge_jobs_namespaces(task, tmp_path):
    """``TRITONDX_JOB_NESTED_RUNNERS=0`` (the way before 2026-12-02): the runner is in the judge job's namespaces,
    the warm runner shares them and runs one candidate at a time (a user and network namespace alone, where the
    job's probe finds them, do not change that)."""
    from tritondx.tools.exec.sandbox import isolation
    from tritondx.tools.verify.judge.spawn import NESTED_ENV
    if isolation().mechanism != "bwrap":
        pytest.skip("the jobs here are not sandboxed by bubblewrap")
    srv = _serve(task, **{NESTED_ENV: "0"})
    try:
        r = _ask(srv, task, [_cand(tmp_path, "ns", NAMESPACES.format())], seal.new_key())
        assert "NS pid=False" in r.result["verdicts"]["ns"]["error"], r.result
        assert r.result["runners"] == "warm (1 forked, one at a time in the judge job)", r.result
    finally:
        srv.close()


def test_cold_runners_of_one_request_leave_each_other_nothing(task, tmp_path):
    """Two cold runners of one request (no warm runner) inside the bubblewrap judge job: each has its own
    namespaces and its own empty /tmp, /var/tmp, /dev/shm and /run (``spawn.SCRATCH_MOUNTS``), its own IPC
    namespace, and its processes die with it: the second finds nothing of the first (before: the job's /dev/shm,
    /var/tmp and /run were shared by every cold runner of the job)."""
    from tritondx.tools.exec.sandbox import isolation
    if isolation().mechanism != "bwrap":
        pytest.skip("the jobs here are not sandboxed by bubblewrap")
    tag = f"k{tmp_path.name[-6:]}"
    srv = _serve(task, TRITONDX_WARM_RUNNERS="0")
    try:
        scratch = str(srv.scratch)
        r = _ask(srv, task, [_cand(tmp_path, "leaver", LEAVER.format(tag=tag, scratch=scratch)),
                             _cand(tmp_path, "finder", FINDER.format(tag=tag, scratch=scratch))], seal.new_key())
        assert "LEFT" in r.result["verdicts"]["leaver"]["error"], r.result
        assert "FOUND []" in r.result["verdicts"]["finder"]["error"], r.result
    finally:
        srv.close()


def test_a_bubblewrap_jobs_user_is_job_uid_unless_set(monkeypatch):
    """Jobs run as ``JOB_UID`` inside bubblewrap (so their runners can have user namespaces of their own);
    ``TRITONDX_JOB_UID=0`` is the way before."""
    from tritondx.tools.exec.sandbox_fs import JOB_UID, JOB_UID_ENV, View, bwrap_command
    view = View(scratch="/nonexistent-scratch", binds=[], network=False)
    monkeypatch.delenv(JOB_UID_ENV, raising=False)
    assert bwrap_command(view)[1:5] == ["--uid", str(JOB_UID), "--gid", str(JOB_UID)] and JOB_UID != 0
    monkeypatch.setenv(JOB_UID_ENV, "0")
    assert bwrap_command(view)[1:5] == ["--uid", "0", "--gid", "0"]
