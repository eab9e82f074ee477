"""Persistence: a job keeps nothing. Untrusted task code (untrusted/persist.py, run by a real sandboxed
probe job started from an "orchestrator" process whose environment holds an API key) tries to write
a ``.pth`` into the venv's site-packages, a file into the package source, the host's $HOME, the
host's /tmp and the run folder; starts a daemon (double fork + setsid) that keeps re-creating its
scratch folder; scans every /proc/*/environ for the orchestrator's API key; tries to
remount / read-write and to write a sysctl. After the job: none of those files exists, the scratch
folder is gone, no process of the job is left, no environ held the key, the remount and the sysctl
write failed.

Run for each sandbox mechanism this machine has (bubblewrap; ``unshare`` with the mount script).
``TRITONDX_TEST_SANDBOX_MECHANISMS=none`` runs the same attack without a sandbox: every test here
then fails (that is how they were checked; the files it leaves are removed afterwards).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tdx_rel import base_env

HERE = Path(__file__).resolve().parent
ATTACK = HERE / "untrusted" / "persist.py"
DRIVER = HERE / "drivers" / "run_job_one.py"
MECHANISMS = os.environ.get("TRITONDX_TEST_SANDBOX_MECHANISMS", "bwrap,unshare").split(",")
SECRET = "sk-persist-" + uuid.uuid4().hex
ROOT_TARGETS = ("site_packages", "package_source", "home", "run_folder")  # must fail with EROFS


def _targets(run_dir: Path) -> dict[str, str]:
    import tritondx
    return {"site_packages": sysconfig.get_paths()["purelib"],
            "package_source": str(Path(tritondx.__file__).resolve().parent),
            "home": str(Path.home()), "host_tmp": tempfile.gettempdir(), "run_folder": str(run_dir)}


def _processes_with(token: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module", params=MECHANISMS)
def attack(request, tmp_path_factory):
    mech = request.param
    tmp = tmp_path_factory.mktemp(f"persist-{mech}")
    run_dir = tmp / "runs" / "20260101-000000-persist-abcdef"
    run_dir.mkdir(parents=True)
    task = run_dir / "task_initial.py"
    shutil.copyfile(ATTACK, task)
    token = uuid.uuid4().hex
    targets = _targets(run_dir)
    cfg = {"token": token, "secret_reversed": SECRET[::-1], "targets": targets}
    env = base_env(tmp, OPENAI_API_KEY=SECRET, TRITONDX_SANDBOX=mech, TRITONDX_JOB_PERSIST=json.dumps(cfg))
    env.pop("TRITONDX_NO_NETNS", None)
    p = subprocess.run([sys.executable, str(DRIVER), str(task)], env=env, cwd=tmp, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if mech != "none" and out["isolation"]["mechanism"] != mech:
        pytest.skip(f"no {mech} sandbox on this machine: {out['isolation']}")
    line = next((ln for ln in out["job"]["stderr_tail"].splitlines() if ln.startswith("PERSIST ")), None)
    assert line, out["job"]
    obs = json.loads(line.split(" ", 1)[1])
    time.sleep(2.0)  # a daemon that survived would have re-created the scratch folder by now
    left = {name: Path(folder) / f"tritondx_persist_{token}{'.pth' if name == 'site_packages' else '.txt'}"
            for name, folder in targets.items()}
    state = {"existing": sorted(n for n, f in left.items() if f.exists()), "scratch_exists": Path(obs["cwd"]).exists(),
             "daemons": _processes_with(token)}
    yield {"obs": obs, "state": state, "job": out["job"], "isolation": out["isolation"]}
    for pid in state["daemons"]:  # only when a defense failed: the daemon this test started
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if state["daemons"]:
        time.sleep(0.5)
    for f in left.values():
        f.unlink(missing_ok=True)
    if state["scratch_exists"] and Path(obs["cwd"]).name.startswith("tritondx-job-"):
        shutil.rmtree(obs["cwd"], ignore_errors=True)


def test_the_attack_ran(attack):
    """The job really ran the attacking code (and its probe answer names it)."""
    assert attack["obs"]["writes"].keys() == set(ROOT_TARGETS) | {"host_tmp"}
    assert "persistence probe done" in attack["job"]["result"]["problem"]


@pytest.mark.parametrize("target", ROOT_TARGETS)
def test_no_file_outside_scratch(attack, target):
    """venv site-packages (.pth), package source, $HOME, run folder: the write fails read-only."""
    assert attack["obs"]["writes"][target] == "EROFS", attack["obs"]["writes"]
    assert target not in attack["state"]["existing"]


def test_host_tmp_is_not_the_jobs(attack):
    """The job's /tmp is its own, empty and gone with it: nothing reaches the host's /tmp."""
    assert "host_tmp" not in attack["state"]["existing"]


def test_scratch_is_cwd_tmpdir_and_gone(attack):
    obs = attack["obs"]
    assert obs["cwd"] == obs["tmpdir"] and Path(obs["cwd"]).name.startswith("tritondx-job-")
    assert not attack["state"]["scratch_exists"], "the scratch folder exists after the job"


def test_no_process_left(attack):
    """A daemon (double fork, setsid: outside the job's process group) ends with the job."""
    assert attack["state"]["daemons"] == [], f"left running: {attack['state']['daemons']}"


def test_orchestrator_environ_unreachable(attack):
    """No /proc/*/environ the job can read holds the orchestrator's API key (PID namespace)."""
    assert attack["obs"]["environ_leaks"] == []


def test_no_remount_no_sysctl(attack):
    """No capability left: / stays read-only; sysctls (plain files uid 0 could write) are read-only."""
    assert attack["obs"]["remount"] != 0
    assert attack["obs"]["sysctl"] in ("EROFS", "EACCES", "EPERM"), attack["obs"]["sysctl"]
