"""The verifier behind its interface (``tools/verify/interface.py``): a run asks the judge unless its settings name
the no-op verifier, which runs nothing and which no report, table, command line or write-back calls verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tritondx.config import RunConfig
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.interface import JudgeVerifier, NoopVerifier, verifier_named

ROOT = Path(__file__).resolve().parents[3]


def test_the_judge_is_the_default_and_names_are_checked(monkeypatch):
    monkeypatch.delenv("TRITONDX_VERIFIER", raising=False)
    assert RunConfig().verifier == "judge" and RunConfig.from_env().verifier == "judge"
    assert isinstance(verifier_named("judge"), JudgeVerifier) and isinstance(verifier_named("noop"), NoopVerifier)
    with pytest.raises(ValueError, match="unknown verifier 'trusting'"):
        verifier_named("trusting")
    monkeypatch.setenv("TRITONDX_VERIFIER", "trusting")
    with pytest.raises(ValidationError):
        RunConfig.from_env()


def test_a_noop_verdict_passes_without_running_and_says_so():
    (v,) = NoopVerifier().verify("task.py", [{"id": "r1c1", "path": "/nonexistent.py"}], get_backend("interpreter"),
                                 [], 1.0, 1)
    assert v.passed and v.scope == "noop" and v.checks == 0 and "no-op verifier" in v.reason


def test_a_run_with_the_noop_verifier_never_says_verified(tmp_path):
    """A real CLI run: no judge job, every candidate "not checked" in the report, a warning in the log and a line
    at the end."""
    env = {**os.environ, "TRITONDX_VERIFIER": "noop", "TRITONDX_RUNS": str(tmp_path / "runs"),
           "TRITONDX_CANDIDATES_PER_ROUND": "2"}
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "tritondx.cli", "optimize", str(ROOT / "examples" / "add_tiny_block.py"),
                        "--backend", "interpreter", "--max-rounds", "1", "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "verifier: no-op" in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["verifier"] == "noop" and report["candidates"], report["candidates"]
    assert all(c["verified"] is None and c["unchecked"] for c in report["candidates"])
    md = (out / "report.md").read_text()
    assert "**Not verified**" in md and "not checked (no-op verifier)" in md and "| yes |" not in md
    assert "Not verified: the no-op verifier" in (out / "report.html").read_text()
    events = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.startswith("{")]
    assert any(e.get("event") == "verifier_not_the_judge" for e in events)
    verified = [e for e in events if e.get("event") == "verified"]
    assert verified and all(e["scope"] == "noop" for e in verified), verified
    assert json.loads((out / "run.json").read_text())["config"]["verifier"] == "noop"


def test_apply_refuses_a_candidate_the_noop_verifier_passed(tmp_path):
    from tritondx.tools.intake.apply import ApplyError, apply_one
    (tmp_path / "report.json").write_text(json.dumps({"verifier": "noop", "best": {"id": "r1c1"}, "task": "t"}))
    (tmp_path / "optimized_task.py").write_text("# candidate\n")
    with pytest.raises(ApplyError, match="no-op verifier"):
        apply_one(tmp_path)
