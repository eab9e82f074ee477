"""Untrusted code: what a candidate can reach from inside its sandboxed verify job.

The candidate (untrusted/snoop.py) reports from inside launch(): its working directory, HOME, any
environment value holding the secrets the test planted in the orchestrator's environment (API key,
proxy credentials, cloud and CI tokens), the orchestrator's /proc environ and command line, a TCP
connection to a loopback server this test listens on, and writes into its own folder, the run folder
and its working directory.

With namespaces (``unshare``: network + PID + mount): no secret, no network, no view of the parent,
the run folder read-only; the working directory is a private temp dir, removed afterwards. With
``TRITONDX_NO_NETNS=1`` (what a machine without user namespaces gets) the sandbox logs a warning
naming what is missing, and the test asserts what still holds and what the code then allows.
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


def _snoop(extra_env: dict[str, str]):
    def fn(tmp: Path):
        run_dir = tmp / "runs" / "20260101-000000-rel_axpy-abcdef"  # laid out like a real run folder
        (run_dir / "candidates").mkdir(parents=True)
        task = run_dir / "task_initial.py"
        shutil.copyfile(TASK, task)
        cand = run_dir / "candidates" / "r1c1_snoop.py"
        shutil.copyfile(SNOOP, cand)
        server = Listener()
        try:
            env = base_env(tmp, **PLANTED, TRITONDX_JOB_PROBE_PORT=str(server.port), **extra_env)
            p = subprocess.run([sys.executable, str(VERIFY_ONE), str(task), str(cand)], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=400)
        finally:
            server.close()
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
        reason = out["verification"]["reason"]
        assert "SNOOP " in reason, reason
        obs = json.loads(reason.split("SNOOP ", 1)[1])
        return out, obs, server.accepted, run_dir
    return fn


ISOLATED = Case("untrusted-isolated", _snoop({}), cost=20)
WEAK = Case("untrusted-no-namespaces", _snoop({"TRITONDX_NO_NETNS": "1"}), cost=20)


def _common(obs: dict, run_dir: Path):
    """What holds with or without namespaces: scrubbed environment, private working directory."""
    assert obs["leaked"] == [], f"secrets reached the candidate: {obs['leaked']}"
    cwd = Path(obs["cwd"])
    # the candidate runs in its own runner folder (tools/verify/spawn.py), not in the judge job's
    assert cwd.name.startswith("tritondx-runner") and str(cwd).startswith(tempfile.gettempdir())
    assert run_dir not in cwd.parents and obs["home"] == obs["cwd"]
    assert obs["w_cwd"] == "written"            # its own scratch space
    assert not cwd.exists(), "the job's private directory was not removed"


@pytest.mark.parametrize("rcase", [ISOLATED], ids=["isolated"])
def test_candidate_sandbox_with_namespaces(rcase, rel_outcomes):
    from tritondx.tools.sandbox import isolation
    iso = isolation()
    if iso.missing:
        pytest.skip(f"this machine gives no {', '.join(iso.missing)} isolation ({iso.note}); "
                    "test_candidate_sandbox_without_namespaces covers what holds then")
    out, obs, accepted, run_dir = rel_outcomes[rcase.id].result()
    assert out["isolation"] == {"prefix": iso.prefix, "network": True, "pids": True, "readonly": True,
                                "mechanism": iso.mechanism, "note": ""}
    _common(obs, run_dir)
    assert obs["net"] != "connected" and accepted == 0, obs["net"]          # no network, not even loopback
    assert obs["ppid"] == 0 and obs["penv"] == "absent" and obs["pcmd"] == "absent"  # the parent is invisible
    assert obs["w_cand"] == "EROFS" and obs["w_run"] == "EROFS"               # the run folder is read-only
    assert not list(run_dir.rglob("written_by_candidate.txt"))
    assert not any(e.get("log_level") == "warning" for e in out["logs"]), out["logs"]


@pytest.mark.parametrize("rcase", [WEAK], ids=["no-namespaces"])
def test_candidate_sandbox_without_namespaces(rcase, rel_outcomes):
    out, obs, accepted, run_dir = rel_outcomes[rcase.id].result()
    iso = out["isolation"]
    assert iso["prefix"] == [] and not (iso["network"] or iso["pids"] or iso["readonly"])
    warnings = [e for e in out["logs"] if e.get("event") == "sandbox_weak_isolation"]
    assert len(warnings) == 1 and "network" in warnings[0]["missing"] and "readonly" in warnings[0]["missing"]
    assert "TRITONDX_NO_NETNS" in warnings[0]["why"]
    _common(obs, run_dir)  # still: no secret in its environment, a private working directory
    # What the code then allows (and says so in the warning): loopback network, writes to the run folder.
    assert obs["net"] == "connected" and accepted >= 1
    assert obs["w_run"] == "written"
    # The parent's environ: readable only with the same privileges as the orchestrator's (root here);
    # without namespaces the orchestrator marks itself non-dumpable so other users' code cannot read it.
    if os.geteuid() != 0:
        assert obs["penv"] != "leaked"
