"""A round's warm runners start first thing in its judge job (tools/verify/judge/prestart.py), beside the judge's
torch import, and only after the seal key has left the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tritondx.tools.verify.judge import job as judge_mod
from tritondx.tools.verify.judge.candidate import Judge
from tritondx.tools.verify.judge import prestart, seal, warm

AXPY = Path(__file__).resolve().parents[1] / "verifier" / "tiny_axpy.py"


class _Pool:
    made: list[dict] = []

    def __init__(self, device, hide, slots=1):
        _Pool.made.append({"seal_in_env": seal.SEAL_ENV in os.environ, "slots": slots})
        self.shared, self.warm, self.why_cold, self.forked, self.closed = False, True, "", 0, False

    def close(self):
        self.closed = True


def _job(n: int) -> dict:
    return {"kind": "verify", "task": str(AXPY), "device": "cpu", "allowed_ops": [], "parallel": 2,
            "candidates": [{"id": f"c{i}", "path": str(AXPY)} for i in range(n)]}


def test_the_seal_key_leaves_before_the_runners_start_and_the_judge_gets_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(warm, "RunnerPool", _Pool)
    monkeypatch.setenv(seal.SEAL_ENV, "k" * 64)
    _Pool.made = []
    prestart.start(_job(3))
    starter, fut = prestart.pool()
    fut.result()
    starter.shutdown()
    assert _Pool.made == [{"seal_in_env": False, "slots": 2}]
    assert seal.SEAL_ENV not in os.environ
    assert prestart.key() == "k" * 64 and prestart.key() == ""   # handed over once
    assert prestart.pool() is None


def test_the_judge_checks_the_round_with_the_prestarted_runners(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(warm, "RunnerPool", _Pool)
    monkeypatch.setattr(Judge, "run", lambda self: {"passed": True})
    monkeypatch.setenv(seal.SEAL_ENV, "s" * 64)
    _Pool.made = []
    job = _job(1)
    prestart.start(job)
    out = judge_mod.verify(job)
    assert len(_Pool.made) == 1, "the judge started runners of its own"
    assert out["runners"].startswith("warm") and seal.valid("s" * 64, out["verdicts"]["c0"])


def test_the_judges_worker_imports_no_torch_before_the_runners_start(tmp_path):
    """The module the worker starts the runners with, and what it imports, hold no torch import (the
    runners' start would wait for it: ~2.5 s)."""
    code = ("import sys; from tritondx.tools.verify.judge import prestart, warm, spawn; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ}, cwd=tmp_path)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
