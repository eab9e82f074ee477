"""Fixtures: the two-kernel program (tests/cpu/capture/program) copied into a git repository and captured."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def tritondx(*args: str, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    exe = shutil.which("tritondx") or str(Path(sys.executable).parent / "tritondx")
    e = {**os.environ, "TRITONDX_RUNS": str(cwd / "runs"), **(env or {})}
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, env=e, cwd=cwd)


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True)


def interpret(code: str, cwd: Path, timeout: int = 600) -> str:
    """Run ``code`` in a fresh Python under the Triton interpreter; its stdout (fails the test on an error)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture
def run_interpreted():
    return interpret


KERNEL_MARK = "# ---- the captured kernel"


def edit_copy(src: str, old: str, new: str) -> str:
    """Replace the first ``old`` after the kernel-copy marker: the kernel copy or launch(), never ORACLE (which
    quotes the original source) nor reference()."""
    start = src.index(KERNEL_MARK)
    at = src.index(old, start)
    assert at < src.index("\ndef reference("), f"{old!r} is not in the kernel copy or launch()"
    return src[:at] + new + src[at + len(old):]


@pytest.fixture
def edit():
    return edit_copy


@pytest.fixture
def run_git():
    return git


@pytest.fixture
def tdx():
    return tritondx


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory) -> Path:
    """A fresh git repository holding the user's program (mykernels.py + main.py), committed."""
    repo = tmp_path_factory.mktemp("user") / "repo"
    shutil.copytree(HERE / "program", repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "user code")
    return repo


@pytest.fixture(scope="module")
def captured(user_repo, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("cap") / "tasks"
    r = tritondx("capture", "--out", str(out), "--", "python", "main.py", cwd=user_repo,
                 env={"TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r
