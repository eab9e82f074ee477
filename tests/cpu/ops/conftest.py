"""Fixtures for the ops tests: the CLI as a user runs it, in a pipe or a pseudo-terminal."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
PROMPT = r"\[a\]ccept / \[r\]eject / \[e\]dit / \[f\]eedback"

# The editor a person would use: changes the first `BLOCK = <n>` in the launcher to 512.
EDITOR_SCRIPT = """
import re, sys
p = sys.argv[1]
s = open(p).read()
s2 = re.sub(r"^(\\s+BLOCK = )\\d+$", r"\\g<1>512", s, count=1, flags=re.M)
assert s2 != s, "nothing to edit"
open(p, "w").write(s2)
"""


def exe() -> str:
    return shutil.which("tritondx") or str(Path(sys.executable).parent / "tritondx")


def cli_env(runs: Path, editor: Path | None = None) -> dict:
    env = {**os.environ, "TRITONDX_RUNS": str(runs), "TERM": "xterm-256color", "COLUMNS": "200"}
    if editor is not None:
        env["EDITOR"] = f"{sys.executable} {editor}"
    env.pop("VISUAL", None)
    return env


@pytest.fixture
def cli(tmp_path):
    def run(*args, input=None, timeout=600, runs=None):
        return subprocess.run([exe(), *args], capture_output=True, text=True, timeout=timeout, input=input,
                              env=cli_env(runs or tmp_path / "runs"), cwd=tmp_path)
    return run


def spawn(args: list[str], env: dict, cwd: Path, log: Path, timeout: float = 240):
    """The CLI in a pseudo-terminal, as a person at a terminal runs it."""
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(exe(), args, env=env, cwd=str(cwd), encoding="utf-8", timeout=timeout,
                          dimensions=(60, 200))
    child.logfile_read = open(log, "w")
    return child


@pytest.fixture(scope="session")
def ops():
    """The helpers above, for test modules (conftest is not importable under --import-mode=importlib)."""
    import types
    return types.SimpleNamespace(EXAMPLES=EXAMPLES, PROMPT=PROMPT, EDITOR_SCRIPT=EDITOR_SCRIPT, ROOT=ROOT,
                                 cli_env=cli_env, spawn=spawn, exe=exe)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, monkeypatch):
    """Where checkpoints go: None (checkpoints.sqlite in the run folder), or a PostgreSQL URL (a database of
    its own on the session's server, with a password) also set as $TRITONDX_CHECKPOINT_URL for the CLI."""
    monkeypatch.delenv("TRITONDX_CHECKPOINT_URL", raising=False)
    if request.param == "sqlite":
        return None
    url = request.getfixturevalue("pg_url")
    monkeypatch.setenv("TRITONDX_CHECKPOINT_URL", url)
    return url
