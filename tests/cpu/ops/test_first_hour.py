"""The first hour with the README alone: it names the command and the test time, keeps two set-up-free
commands; bootstrap shows what it installs (one line per step, pip's output in a log) and the example installs no
test extras; the test command sets up the triton-ascend environment the
Ascend tests need (as CI did before), so CI runs just the README's command.

The scripts run for real on a copy of the repository's scripts, with a stand-in `python3`/venv python
that records what it is asked to do (no packages are installed)."""

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# A stand-in interpreter: logs its arguments; `import torch` fails until pip installed it, pip and pytest
# succeed,
# the toolchain `find` fails until `install` ran; `python3 -m venv DIR` makes DIR/bin/python (this script).
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
if [ "$1" = "-c" ]; then [ -f "$FAKE_LOG.torch" ]; exit $?; fi
if [ "$2" = "pip" ]; then
  echo "Collecting something"
  if [ -n "${FAKE_PIP_FAIL:-}" ]; then echo "ERROR: no matching distribution"; exit 1; fi
  case "$*" in *torch==*) sleep "${FAKE_PIP_SLEEP:-0}"; touch "$FAKE_LOG.torch";; esac
  exit 0
fi
if [ "$2" = "tritondx.tools.npu.toolchain" ] && [ "$3" = "find" ]; then [ -f "$FAKE_LOG.npu" ]; exit $?; fi
if [ "$2" = "tritondx.tools.npu.toolchain" ] && [ "$3" = "install" ]; then touch "$FAKE_LOG.npu"; exit 0; fi
exit 0
"""


def _sandbox(tmp_path):
    root = tmp_path / "clone"
    shutil.copytree(ROOT / "scripts", root / "scripts")
    shutil.copy(ROOT / "pyproject.toml", root)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_LOG": str(log)}
    env.pop("TRITONDX_VENV", None)
    return root, env, log


def _run(script, root, env):
    return subprocess.run(["bash", str(root / "scripts" / script)], capture_output=True, text=True, env=env,
                          timeout=120)


def _pip_installs(log):
    return [ln for ln in log.read_text().splitlines() if ln.startswith("-m pip ")]


def test_bootstrap_says_what_it_installs(tmp_path):
    root, env, log = _sandbox(tmp_path)
    r = _run("bootstrap.sh", root, env)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert "bootstrap: installing torch 2.13.0 (CPU) ..." in err and "bootstrap: installing tritondx" in err
    assert re.search(r"bootstrap: ready in \d+ s: the command is .*/\.venv/bin/tritondx", err)
    # quiet: pip's own output goes to the log the first line names, one line per step on stderr
    assert "Collecting something" not in err
    assert "Collecting something" in (root / ".venv" / "bootstrap.log").read_text()
    assert f"{root}/.venv/bootstrap.log" in err.splitlines()[0]
    assert len(err.splitlines()) <= 5, err
    # lean: the example's install has no test extras
    pips = _pip_installs(log)
    assert any(ln.endswith(f"-e {root}") for ln in pips), pips
    assert not any("[test]" in ln for ln in pips), pips
    again = _run("bootstrap.sh", root, env)  # nothing changed: silent and quick
    assert again.returncode == 0 and again.stderr == ""


def test_the_test_extras_come_on_top_of_the_example_install(tmp_path):
    root, env, log = _sandbox(tmp_path)
    assert _run("bootstrap.sh", root, env).returncode == 0
    n = len(_pip_installs(log))
    r = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    new = _pip_installs(log)[n:]
    assert len(new) == 1 and new[0].endswith(f"-e {root}[test]"), new  # torch is not installed again
    assert "test extras" in r.stderr
    again = _run("bootstrap.sh", root, env)  # the test install covers the example's
    assert again.returncode == 0 and again.stderr == "" and len(_pip_installs(log)) == n + 1


def test_a_failed_install_names_its_log(tmp_path):
    root, env, log = _sandbox(tmp_path)
    env["FAKE_PIP_FAIL"] = "1"
    r = _run("bootstrap.sh", root, env)
    assert r.returncode == 1
    logfile = root / ".venv" / "bootstrap.log"
    assert f"pip's output is in {logfile}" in r.stderr
    assert "| ERROR: no matching distribution" in r.stderr  # its last lines are shown
    assert not (root / ".venv" / ".tritondx-installed").exists()


def test_a_long_step_says_it_is_still_running(tmp_path):
    """A line every 30 s while a step runs; $TRITONDX_HEARTBEAT_S sets the interval (2 s here, so the test does not
    wait 30 s for the first line): a 6 s step says it is still running at least twice."""
    root, env, log = _sandbox(tmp_path)
    env["FAKE_PIP_SLEEP"] = "6"
    env["TRITONDX_HEARTBEAT_S"] = "2"
    r = _run("bootstrap.sh", root, env)
    assert r.returncode == 0, r.stderr
    said = re.findall(r"bootstrap:   \.\.\. still installing torch \d+\.\d+\.\d+ \((\d+) s\)", r.stderr)
    assert len(said) >= 2 and all(int(s) >= 2 for s in said), r.stderr
    assert "every 30 s ($TRITONDX_HEARTBEAT_S)" in (ROOT / "scripts" / "bootstrap.sh").read_text()


def test_run_example_installs_no_test_extras():
    text = (ROOT / "scripts" / "run-example.sh").read_text()
    assert 'bootstrap.sh"\n' in text and "bootstrap.sh\" test" not in text
    assert 'bootstrap.sh" test' in (ROOT / "scripts" / "test.sh").read_text()


def test_test_command_sets_up_the_ascend_environment(tmp_path):
    root, env, log = _sandbox(tmp_path)
    r = _run("test.sh", root, env)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    install = [i for i, c in enumerate(calls) if c == "-m tritondx.tools.npu.toolchain install"]
    pytest_call = [i for i, c in enumerate(calls) if c.startswith("-m pytest tests/cpu")]
    assert install and pytest_call and install[0] < pytest_call[0]
    assert "installing the triton-ascend environment" in r.stderr and "minutes on 2 cores" in r.stderr
    again = _run("test.sh", root, env)  # installed now: not again
    assert again.returncode == 0
    assert log.read_text().splitlines().count("-m tritondx.tools.npu.toolchain install") == 1


def test_ci_runs_the_readme_command_only():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci and "toolchain" not in ci and "bootstrap" not in ci


def test_readme_names_the_command_and_the_cost():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert [b.strip() for b in blocks] == ["bash scripts/run-example.sh", "bash scripts/test.sh"]
    assert ".venv/bin/tritondx" in section and "minutes on 2 cores" in section
    assert "triton-ascend" in section
    # what the first command installs (not the test extras), where pip's output goes, measured times with conditions
    assert "not the test extras" in section and ".venv/bootstrap.log" in section
    assert "load average" in section and re.search(r"\d+-\d+ s", section)
