"""Issue 18's walkthrough on a fresh clone: what a new user hit, one test each (notes/walk18.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# The child: after `exec` (as scripts/run-example.sh does), run_task with the graph stubbed out; prints
# the report's startup phase and wall, and the seconds since the exec'd interpreter started.
_CHILD = r"""
import time; t_exec = time.time()
import json, sys
from tritondx import runner
from tritondx.config import RunConfig
seen = {}
def drive(graph, state_in, config, cfg, approver=None, started_at=None):
    seen.update(started_at=started_at)   # where the report node's wall time starts (RunContext)
    return {}, []
runner.drive = drive
runner.finish = lambda run_dir: {}
runner.run_task(sys.argv[1], RunConfig(mode="optimize"), out=sys.argv[2])
print(json.dumps({**seen, "t_exec": t_exec, "now": time.time()}))
"""


def test_startup_counts_only_this_process_after_an_exec(tmp_path):
    """The example script execs tritondx after a minutes-long install: the install is not the run's
    startup (was: startup 155.7 s, 164% of the wall)."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    cmd = f'sleep 3; exec "{sys.executable}" -c "$0" "$1" "$2"'
    p = subprocess.run(["bash", "-c", cmd, _CHILD, str(ROOT / "examples" / "add_tiny_block.py"),
                        str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    # the run's clock starts in this process (its imports count), not at the install before the exec
    assert seen["t_exec"] - 0.1 <= seen["started_at"] <= seen["now"], seen


_COVERAGE = [
    "shape (5, 300) dtype float32 seed 11: listed in CHECK_SHAPES",
    "shape (5, 300) dtype float16 seed 12: listed in CHECK_SHAPES",
    "shape (3, 64) dtype float32 seed 13: derived: reaches silu_rowsum_kernel:10 True",
    "shape (5, 300) dtype float32 values large seed 14: value stress: reduction (sum): inputs x100",
    "silu_rowsum_kernel line 10 `if EVEN` (new test): covered: false by shape (5, 300) dtype float32, "
    "true by shape (3, 64) dtype float32",
]


def test_a_round_verdict_keeps_the_judges_coverage():
    """The round job's verdicts carry the plan summary (was: dropped, so neither the report nor
    `tritondx verify` could say which shapes and branches were checked)."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.judge import seal
    from tritondx.tools.verify.verification import _verdict_from
    key = seal.new_key()
    answer = seal.sign(key, {"passed": True, "checks": [], "ran": ["values vs reference (judge)"],
                             "coverage": _COVERAGE})
    v = _verdict_from({"id": "r2c1"}, answer, key, get_backend("interpreter"), 1.0, True)
    assert v.passed and v.coverage == _COVERAGE


def test_the_report_says_what_was_checked(tmp_path):
    """report.md / report.html / report.json: tolerances (per output where the task gives several),
    and per candidate its shapes, dtypes, value stress and each added branch with the case that reached
    each side."""
    from tritondx.tools.report.writer import write_outputs
    task = tmp_path / "task_initial.py"
    task.write_text("x = 1\n")
    cand = {"id": "r2c1", "round": 2, "tier": "ir", "family": "mask_removal", "params": {}, "description": "EVEN",
            "motivated_by": [], "prediction": "", "path": str(task), "parent": "initial"}
    state = {"task_path": str(task), "task_name": "t", "config": {"mode": "optimize"}, "best": {"id": "initial"},
             "candidates": [cand, {**cand, "id": "r2c2"}],
             "probe": {"tolerances": {"float32": [1e-3, 1e-4], "float16": [1.0, 1e-3]},
                       "tolerance_entries": {"float32": {"-1": [1e-3, 1e-4]},
                                             "float16": {"0": [1.0, 0.0], "1": [0.0, 1e-3]}}},
             "verifications": [{"id": "r2c1", "candidate_id": "r2c1", "passed": True, "coverage": _COVERAGE},
                               {"id": "r2c2", "candidate_id": "r2c2", "passed": False, "klass": "mismatch",
                                "reason": "output 0 differs at (3, 7)"}]}
    write_outputs(tmp_path, state, wall=10.0)
    md = (tmp_path / "report.md").read_text()
    assert "## What was checked" in md
    assert "Tolerances: float32 atol 0.001 rtol 0.0001; float16 output 0: atol 1 rtol 0, output 1: atol 0 rtol 0.001" \
        in md
    assert "- r2c1 (verified): 4 cases: shapes (5, 300), (3, 64); dtypes float32, float16; value stress: large" in md
    assert "  - silu_rowsum_kernel line 10 `if EVEN` (new test): covered: false by shape (5, 300)" in md
    assert "- r2c2 (rejected (mismatch)): output 0 differs at (3, 7)" in md
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["candidates"][0]["coverage"] == _COVERAGE and rep["tolerances"].startswith("float32 atol")
    html = (tmp_path / "report.html").read_text()
    assert "What was checked" in html and "`if EVEN`" in html


def test_a_wrong_command_line_is_one_line_and_exit_2(monkeypatch, capsys):
    """`tritondx runs FOLDER`, a missing argument, an unknown verb: one line and exit 2 (was:
    "tritondx: internal error: UsageError: ...", exit 1: typer vendors click as typer._click)."""
    import pytest

    from tritondx import cli
    for argv in (["runs", "/tmp/x"], ["optimize"], ["bogus"]):
        monkeypatch.setattr(sys, "argv", ["tritondx", *argv])
        with pytest.raises(SystemExit) as ex:
            cli.main()
        err = capsys.readouterr().err.strip().splitlines()
        assert ex.value.code == 2, (argv, err)
        assert len(err) == 1 and err[0].startswith("tritondx: error: ") and "internal error" not in err[0], err


def test_every_verb_logs_the_projects_events_at_info():
    """`tritondx verify` printed structlog's default debug lines (`[debug] job_done ...`): the CLI's
    callback configures logging for every verb, at info, short lines, secrets redacted."""
    child = ("import structlog, sys\n"
             "from tritondx import cli\n"
             "cli._main(debug=False)\n"
             "log = structlog.get_logger('tritondx.tools.exec.sandbox')\n"
             "log.debug('job_done', job='probe', seconds=4.2)\n"
             "log.info('verified', candidate='r1c1', token='s3cr3t-value-123')\n")
    env = {**os.environ, "TRITONDX_TEST_API_KEY": "s3cr3t-value-123"}
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "job_done" not in p.stdout + p.stderr
    assert "verified candidate=r1c1" in p.stderr and "s3cr3t-value-123" not in p.stdout + p.stderr


def test_verify_a_candidate_in_another_folder_than_its_task(cli, tmp_path):
    """`tritondx verify TASK CANDIDATE` with the candidate in a folder of its own under /tmp (hidden in
    the sandbox): the round job's candidates are bound readable too (was: rejected `exception:
    FileNotFoundError`, a fork of a copied run folder too); the output says what was checked."""
    import shutil
    task = ROOT / "examples" / "add_tiny_block.py"
    cand = tmp_path / "mine" / "cand.py"
    cand.parent.mkdir()
    shutil.copyfile(task, cand)
    r = cli("verify", str(task), str(cand), "--backend", "interpreter")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert r.stdout.startswith(f"verified: {cand}")
    assert "checked: " in r.stdout and "shapes (1000,), (4097,), (65536,)" in r.stdout, r.stdout


def test_batch_summary_says_speed_not_measured(tmp_path):
    """summary.md's speedup cell of a finished CPU task (was: "done", read as a result)."""
    from tritondx.batch_summary import write_summary
    entry = {"task": "silu_rowsum", "kernel_class": "reduction", "status": "done", "speedup": None,
             "tiers_used": ["triage"], "wall_s": 29.0, "cost": {}}
    write_summary(tmp_path, [entry, {**entry, "task": "bad", "status": "failed: bad task"}], {"suite": "s"})
    md = (tmp_path / "summary.md").read_text()
    assert "| silu_rowsum | reduction | - | - | not measured |" in md
    assert "| bad | reduction | - | - | failed: bad task |" in md
