"""The sandbox's namespaces on a CUDA host (need CUDA; marked ``gpu``; skipped elsewhere).

The CPU suite (tests/cpu/reliability/test_untrusted.py) checks what a candidate can reach from its
sandboxed verify job under the interpreter. Here the same jobs run on the GPU: the worker opens the
CUDA driver inside the sandbox (``tools/exec/sandbox_fs.py``: the file system read-only but a private scratch
folder; own PID, network, IPC namespaces; no capabilities), once per mechanism this host has
(bubblewrap with the /dev/nvidia* nodes bound in; ``unshare`` with the mount script).

- An honest candidate passes with full isolation (network + PID + mount namespaces), with no
  ``sandbox_weak_isolation`` / ``sandbox_mount_failed`` warning: CUDA and Triton's JIT work inside.
- The snooping candidate (tests/cpu/reliability/untrusted/snoop.py, on ``cuda`` tensors) sees no
  planted secret, cannot connect to a loopback server, cannot see the orchestrator (its own PID namespace, no /proc
  entry of the orchestrator) and cannot write into the run folder.

When this machine gives less than full isolation the tests are skipped, naming what is missing (then
candidate code still gets a scrubbed environment, a private working directory, a timeout).

Run on a GPU machine: ``python -m pytest tests/gpu/reliability -q -m gpu``.
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
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).resolve().parent
CPU_SUITE = HERE.parents[1] / "cpu" / "reliability"
TASK = CPU_SUITE / "tasks" / "tiny_axpy.py"
SNOOP = CPU_SUITE / "untrusted" / "snoop.py"
VERIFY_ONE = CPU_SUITE / "drivers" / "verify_one.py"
HONEST = HERE / "candidates" / "g0_honest.py"
PLANTED = {
    "OPENAI_API_KEY": "sk-snoop-0123456789abcdef",
    "HTTPS_PROXY": "http://user:snoop-pw@proxy.invalid:3128",
    "AWS_SECRET_ACCESS_KEY": "snoop-aws-secret",
    "GITHUB_TOKEN": "ghp_snoop0123456789",
    "HF_TOKEN": "hf_snoop0123456789",
    "TRITONDX_JOB_API_KEY": "snoop-allowed-prefix-but-secret-name",
}


@pytest.fixture(scope="module", autouse=True)
def _full_isolation():
    from tritondx.tools.exec.sandbox import isolation
    iso = isolation()
    if iso.missing:
        pytest.skip(f"this GPU host gives no {', '.join(iso.missing)} isolation ({iso.note}): candidate jobs "
                    "run with a scrubbed environment, private cwd and timeout only")


class _Listener:
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


MECHANISMS = ["bwrap", "unshare"]


def _verify_in_run_folder(tmp: Path, candidate: Path, mech: str) -> tuple[dict, int, Path]:
    """verify_one.py (the verifier's own path) on the cuda backend, in a process whose environment holds
    the planted secrets, with task and candidate laid out like a real run folder."""
    run_dir = tmp / "runs" / "20260101-000000-rel_axpy-abcdef"
    (run_dir / "candidates").mkdir(parents=True)
    task = run_dir / "task_initial.py"
    shutil.copyfile(TASK, task)
    cand = run_dir / "candidates" / f"r1c1_{candidate.stem}.py"
    shutil.copyfile(candidate, cand)
    server = _Listener()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "TRITONDX_")) and k not in ("HTTPS_PROXY", "http_proxy")}
    env.update(PLANTED, TRITONDX_JOB_PROBE_PORT=str(server.port), TRITONDX_RUNS=str(tmp / "runs"),
               TRITONDX_CACHE=str(tmp / "cache"), TRITONDX_SANDBOX=mech)
    try:
        p = subprocess.run([sys.executable, str(VERIFY_ONE), str(task), str(cand), "cuda"], cwd=tmp, env=env,
                           capture_output=True, text=True, timeout=600)
    finally:
        server.close()
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    iso = out["isolation"]
    if iso["mechanism"] != mech:
        pytest.skip(f"no {mech} sandbox on this host: {iso}")
    assert iso["network"] and iso["pids"] and iso["readonly"], iso
    assert not [e for e in out["logs"] if e.get("log_level") == "warning"], out["logs"]
    return out, server.accepted, run_dir


@pytest.mark.parametrize("mech", MECHANISMS)
def test_honest_candidate_passes_with_full_isolation(tmp_path, mech):
    out, accepted, run_dir = _verify_in_run_folder(tmp_path, HONEST, mech)
    v = out["verification"]
    assert v["passed"] is True and v["backend"] == "cuda" and v["checks"] > 0, v
    assert accepted == 0
    assert sorted(p.name for p in run_dir.rglob("*")) == ["candidates", "r1c1_g0_honest.py", "task_initial.py"]


@pytest.mark.parametrize("mech", MECHANISMS)
def test_snooping_candidate_on_cuda_is_contained(tmp_path, mech):
    out, accepted, run_dir = _verify_in_run_folder(tmp_path, SNOOP, mech)
    reason = out["verification"]["reason"]
    assert not out["verification"]["passed"] and "SNOOP " in reason, reason
    obs = json.loads(reason.split("SNOOP ", 1)[1])
    assert obs["leaked"] == [], f"secrets reached the candidate: {obs['leaked']}"
    assert obs["net"] != "connected" and accepted == 0, obs["net"]                  # no network, not even loopback
    assert obs["netns"] != os.readlink("/proc/self/ns/net").split(":", 1)[1]
    assert obs["pidns"] != os.readlink("/proc/self/ns/pid").split(":", 1)[1]
    n, leaked, run_cmd, orchestrator = obs["procs"]
    assert leaked == 0 and run_cmd == 0 and orchestrator == 0, obs["procs"]         # the orchestrator is invisible
    assert obs["penv"] != "leaked" and obs["pcmd"] != "has_run_dir"
    # its parent is its namespace's init (a warm runner's zygote, ppid 1) or none (a cold runner is the init);
    # inside a bubblewrap judge job it lists the job's processes (spawn.NESTED_RUNNER_NAMESPACES)
    assert obs["ppid"] in (0, 1) and n <= 8, obs
    # the run folder is read-only where it is visible (EROFS), or not there at all (ENOENT: the runner's
    # fresh /tmp hides a run folder under the host's /tmp)
    assert obs["w_cand"] in ("EROFS", "ENOENT") and obs["w_run"] in ("EROFS", "ENOENT"), obs
    assert not list(run_dir.rglob("written_by_candidate.txt"))
    # the candidate runs in its own runner folder (tools/verify/judge/spawn.py), removed after the job
    cwd = Path(obs["cwd"])
    assert cwd.name.startswith("tritondx-runner") and str(cwd).startswith(tempfile.gettempdir())
    assert run_dir not in cwd.parents and obs["home"] is True and obs["w_cwd"] == "written" and not cwd.exists()
