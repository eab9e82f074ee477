"""Untrusted code: what a candidate can reach from inside its sandboxed verify job.

The candidate (untrusted/snoop.py) reports from inside launch(): its working directory, HOME, any
environment value holding the secrets the test planted in the orchestrator's environment (API key,
proxy credentials, cloud and CI tokens), its PID and network namespaces, every process its /proc
lists (an environ holding a secret, a command line naming the run folder: the orchestrator's does),
a TCP connection to a loopback server this test listens on, and writes into the run folder, its
candidates/ and its working directory. The run folder lies outside the temp folder, as a user's does.

Three settings:

- namespaces (bwrap or unshare): the judge job is sandboxed (read-only file system but its scratch)
  and the candidate's runner has its own user, network, PID and mount namespaces
  (``tools/verify/judge/spawn.py``): no secret, no network, only its namespace's processes in /proc, the
  run folder read-only, no warning;
- ``TRITONDX_NO_NETNS=1``: the orchestrator's jobs run without a sandbox, and it warns that network,
  pids and readonly are missing. The switch is not passed to jobs (``sandbox.scrubbed_env``), so the
  judge job probes the machine again and, where namespaces work, still gives the runner its own
  network and PID namespaces: no network, no orchestrator in /proc. The file system is not
  read-only: the run folder is writable (as the warning says);
- a machine where bwrap and unshare fail (simulated by failing ``bwrap``/``unshare`` first on PATH,
  which the jobs inherit): nothing is isolated but the environment, the working directory, the
  timeout and the memory limit; loopback and the run folder are reachable, the orchestrator is in
  /proc (its environ closed to other users: it marks itself non-dumpable; root reads it anyway).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tdx_rel import TASK, Case, base_env

HERE = Path(__file__).resolve().parent
SNOOP = HERE / "untrusted" / "snoop.py"
VERIFY_ONE = HERE / "drivers" / "verify_one.py"
PLANTED = {
    "OPENAI_API_KEY": "sk-snoop-0123456789abcdef",
    "HTTPS_PROXY": "http://user:snoop-pw@proxy.invalid:3128",
    "http_proxy": "http://user:snoop-pw@proxy.invalid:3128",
    "AWS_SECRET_ACCESS_KEY": "snoop-aws-secret",
    "GITHUB_TOKEN": "ghp_snoop0123456789",
    "HF_TOKEN": "hf_snoop0123456789",
    "TRITONDX_JOB_API_KEY": "snoop-allowed-prefix-but-secret-name",
}


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self):
        self._stop = True
        self._t.join(timeout=5)
        self.sock.close()


def _outside_tmp() -> Path:
    """Where the test puts the run folder: outside the folders a runner gets empty ones of (/tmp, /var/tmp,
    /dev/shm, /run: ``spawn.SCRATCH_MOUNTS``), as a user's runs/ is, so the writes say something: the checkout's
    own folder (a user's runs/ is there too)."""
    from tritondx.tools.verify.judge.spawn import SCRATCH_MOUNTS
    emptied = (tempfile.gettempdir(), "/tmp", *SCRATCH_MOUNTS)
    for place in (HERE, Path.home()):   # the checkout; its own clone under /tmp: the home folder
        if os.access(place, os.W_OK) and not any(str(place).startswith(d + "/") for d in emptied):
            return place
    pytest.skip("neither the checkout nor the home folder is a writable folder outside the ones runners get empty")


def _failing_tools(tmp: Path, names: tuple[str, ...]) -> dict[str, str]:
    """PATH with commands ``names`` that fail as they do where user namespaces are off."""
    if not names:
        return {}
    bin_dir = tmp / "failing-bin"
    bin_dir.mkdir()
    for name in names:
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho '{name}: Operation not permitted' >&2\nexit 1\n")
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _snoop(extra_env: dict[str, str], failing: tuple[str, ...] = ()):
    def fn(tmp: Path):
        extra = {**extra_env, **_failing_tools(tmp, failing)}
        base = Path(tempfile.mkdtemp(prefix="rel-untrusted-", dir=_outside_tmp()))
        run_dir = base / "runs" / "20260101-000000-rel_axpy-abcdef"  # laid out like a real run folder
        (run_dir / "candidates").mkdir(parents=True)
        task = run_dir / "task_initial.py"
        shutil.copyfile(TASK, task)
        cand = run_dir / "candidates" / "r1c1_snoop.py"
        shutil.copyfile(SNOOP, cand)
        server = Listener()
        try:
            env = base_env(tmp, **PLANTED, TRITONDX_JOB_PROBE_PORT=str(server.port),
                           TRITONDX_JOB_PROBE_RUN_DIR=str(run_dir), **extra)
            p = subprocess.run([sys.executable, str(VERIFY_ONE), str(task), str(cand)], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=400)
            written = sorted(str(f.relative_to(run_dir)) for f in run_dir.rglob("written_by_candidate.txt"))
        finally:
            server.close()
            shutil.rmtree(base, ignore_errors=True)
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
        reason = out["verification"]["reason"]
        assert "SNOOP " in reason, reason
        obs = json.loads(reason.split("SNOOP ", 1)[1])
        return out, obs, server.accepted, run_dir, written
    return fn


ISOLATED = Case("untrusted-isolated", _snoop({}), cost=20)
WEAK = Case("untrusted-no-namespaces", _snoop({"TRITONDX_NO_NETNS": "1"}), cost=20)
NO_USERNS = Case("untrusted-no-user-namespaces", _snoop({}, failing=("bwrap", "unshare")), cost=20)


def _common(obs: dict, run_dir: Path):
    """What holds with or without namespaces: scrubbed environment, private working directory."""
    assert obs["leaked"] == [], f"secrets reached the candidate: {obs['leaked']}"
    cwd = Path(obs["cwd"])
    # the candidate runs in its own runner folder (tools/verify/judge/spawn.py), not in the judge job's
    assert cwd.name.startswith("tritondx-runner") and str(cwd).startswith(tempfile.gettempdir())
    assert run_dir not in cwd.parents and obs["home"] is True  # HOME is the working directory
    assert obs["w_cwd"] == "written"            # its own scratch space
    assert not cwd.exists(), "the job's private directory was not removed"


def _own_namespaces(obs: dict, accepted: int, pids: bool = True) -> None:
    """The runner has its own network (and ``pids``: PID) namespace: no connection to the test's loopback
    server; /proc lists no process outside the judge job (a runner inside a bubblewrap job keeps the job's
    /proc: the kernel refuses it a new one, ``spawn.NESTED_RUNNER_NAMESPACES``), none of them the orchestrator
    (whose environ holds the planted secrets and whose command line names the run folder and its script)."""
    assert obs["net"] != "connected" and accepted == 0, obs["net"]          # no network, not even loopback
    assert obs["netns"] != os.readlink("/proc/self/ns/net").split(":", 1)[1]
    if not pids:
        return
    assert obs["pidns"] != os.readlink("/proc/self/ns/pid").split(":", 1)[1]
    n, leaked, run_cmd, orchestrator = obs["procs"]
    assert leaked == 0 and run_cmd == 0 and orchestrator == 0, obs["procs"]   # the orchestrator is invisible
    assert obs["penv"] != "leaked" and obs["pcmd"] != "has_run_dir"


@pytest.mark.parametrize("rcase", [ISOLATED], ids=["isolated"])
def test_candidate_sandbox_with_namespaces(rcase, rel_outcomes):
    from tritondx.tools.exec.sandbox import isolation
    iso = isolation()
    if iso.missing:
        pytest.skip(f"this machine gives no {', '.join(iso.missing)} isolation ({iso.note}); "
                    "test_candidate_sandbox_without_namespaces covers what holds then")
    out, obs, accepted, run_dir, written = rel_outcomes[rcase.id].result()
    assert out["isolation"] == {"prefix": iso.prefix, "network": True, "pids": True, "readonly": True,
                                "mechanism": iso.mechanism, "note": ""}
    _common(obs, run_dir)
    _own_namespaces(obs, accepted)
    # the processes it lists are its own namespace's (its zygote as init, or itself), or in a bubblewrap job the
    # judge job's (judge, warm runners, runners: a handful; CUDA does not start in a PID namespace of their own
    # there, spawn.NESTED_RUNNER_NAMESPACES)
    assert obs["procs"][0] <= 12, obs
    assert obs["w_cand"] == "EROFS" and obs["w_run"] == "EROFS"               # the run folder is read-only
    assert written == []
    assert not any(e.get("log_level") == "warning" for e in out["logs"]), out["logs"]


def _weak_warning(out: dict, why: str) -> None:
    iso = out["isolation"]
    assert iso["prefix"] == [] and not (iso["network"] or iso["pids"] or iso["readonly"])
    warnings = [e for e in out["logs"] if e.get("event") == "sandbox_weak_isolation"]
    assert len(warnings) == 1 and all(m in warnings[0]["missing"] for m in ("network", "pids", "readonly"))
    assert why in warnings[0]["why"]
    assert "NOT kept: the job can write" in warnings[0]["kept"]


@pytest.mark.parametrize("rcase", [WEAK], ids=["no-namespaces"])
def test_candidate_sandbox_without_namespaces(rcase, rel_outcomes):
    from tritondx.tools.exec.sandbox import isolation
    out, obs, accepted, run_dir, written = rel_outcomes[rcase.id].result()
    _weak_warning(out, "TRITONDX_NO_NETNS")
    _common(obs, run_dir)  # still: no secret in its environment, a private working directory
    machine = isolation()  # what the judge job finds when it probes (this process has no TRITONDX_NO_NETNS)
    if not machine.network:
        pytest.skip("no namespaces on this machine: test_candidate_sandbox_without_user_namespaces covers it")
    # The judge job, started without the switch, gave the runner its own namespaces anyway (spawn.py):
    _own_namespaces(obs, accepted, pids=machine.pids)
    if machine.pids:
        assert obs["ppid"] == 0 and obs["procs"][0] == 1, obs  # a cold runner: its namespace's init, alone
    # ... but no read-only file system (the judge job has no sandbox): the run folder is writable
    assert obs["w_run"] == "written" and obs["w_cand"] == "written"
    assert written == ["candidates/written_by_candidate.txt", "written_by_candidate.txt"]


@pytest.mark.parametrize("rcase", [NO_USERNS], ids=["no-user-namespaces"])
def test_candidate_sandbox_without_user_namespaces(rcase, rel_outcomes):
    out, obs, accepted, run_dir, written = rel_outcomes[rcase.id].result()
    _weak_warning(out, "neither bwrap (bubblewrap) nor unshare (user namespaces) works here")
    _common(obs, run_dir)  # still: no secret in its environment, a private working directory
    # What the code then allows (and says so in the warning): loopback network, writes to the run folder,
    # the host's processes in /proc (the orchestrator's among them: its command line names the run folder)
    assert obs["net"] == "connected" and accepted >= 1
    assert obs["pidns"] == os.readlink("/proc/self/ns/pid").split(":", 1)[1] and obs["procs"][2] >= 1, obs
    assert obs["w_run"] == "written" and written
    # The orchestrator's environ: readable only with its privileges (root here); without namespaces it
    # marks itself non-dumpable, so other users' code cannot read it.
    if os.geteuid() != 0:
        assert obs["procs"][1] == 0, obs["procs"]
