"""Issue 38, labels: one wording per fact across `history`, `show`, `runs`, the batch HTML and summary.md, and one
wording per error across `verify` and `optimize`."""

import json
import subprocess
from types import SimpleNamespace

from tritondx.replay import Run, _speed, list_runs
from tritondx.tools.report.html import render_batch_html

from .conftest import EXAMPLES, cli_env, exe


def test_nothing_measured_is_not_one_x():
    assert _speed({"id": "initial", "path": "t.py", "median_ms": None, "speedup": 1.0}) == "not measured"
    assert _speed({"id": "r1c2", "speedup": 1.0, "measured": False}) == "not measured"
    assert _speed({"id": "r1c2", "speedup": 1.37, "measured": True}) == "1.37x"
    assert _speed({"id": "initial", "speedup": 1.0, "median_ms": 0.02}) == "1.00x"  # timed: the baseline
    assert _speed({}) == "-"


def _snap(cid, parent, source, nxt=()):
    return SimpleNamespace(config={"configurable": {"checkpoint_id": cid}},
                           parent_config={"configurable": {"checkpoint_id": parent}} if parent else None,
                           metadata={"source": source}, next=tuple(nxt))


def _writers(snaps, meta):
    run = Run.__new__(Run)
    run.meta = meta
    run.snapshots = lambda: snaps
    return run.writers()


def test_an_in_place_replay_is_no_fork():
    snaps = [_snap("c4", "c3", "loop"), _snap("c3", "c1", "fork", ["rewriter"]), _snap("c2", "c1", "loop"),
             _snap("c1", "c0", "loop", ["rewriter"]), _snap("c0", None, "input", ["triage"])]
    w = _writers(snaps, {"thread_id": "t"})
    assert w["c3"] == "(replay)" and w["c0"] == "(input)" and w["c4"] == "rewriter"
    forked = [_snap("f1", "f0", "loop"), _snap("f0", None, "update", ["verifier"])]
    assert _writers(forked, {"thread_id": "u", "forked_from": {"run": "x"}})["f0"] == "(fork)"
    assert _writers(forked, {"thread_id": "u"})["f0"] == "(update)"


def _run_folder(d, task, report=None):
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"task": f"/x/{task}.py", "thread_id": d.name, "config": {}}))
    if report:
        (d / "report.json").write_text(json.dumps(report))


def test_runs_lists_the_runs_inside_batch_folders(tmp_path):
    rep = {"task": "alpha", "status": "done", "mode": "optimize", "speedup": None, "best": {"id": "initial"}}
    _run_folder(tmp_path / "20261204-alpha-abc", "alpha", rep)
    _run_folder(tmp_path / "batch-suite" / "runs" / "beta", "beta", {**rep, "task": "beta"})
    _run_folder(tmp_path / "batch-suite" / "runs" / "gamma", "gamma")
    (tmp_path / "batch-suite" / "results.json").write_text("{}")
    rows = {r["folder"]: r for r in list_runs(tmp_path)}
    assert set(rows) == {"20261204-alpha-abc", "batch-suite/runs/beta", "batch-suite/runs/gamma"}
    assert rows["batch-suite/runs/beta"]["task"] == "beta" and rows["batch-suite/runs/beta"]["speedup"] == "not measured"
    # the batch folder itself, listed with --dir
    assert {r["folder"] for r in list_runs(tmp_path / "batch-suite")} == {"runs/beta", "runs/gamma"}


def test_the_batch_html_says_not_measured_as_summary_md_does():
    entry = {"task": "silu_rowsum", "kernel_class": "reduction", "status": "done", "speedup": None,
             "tiers_used": ["triage"], "wall_s": 29.0}
    page = render_batch_html([entry, {**entry, "task": "bad", "status": "failed"}], {}, {"suite": "s"})
    assert ">not measured<" in page and ">done<" not in page and ">failed<" in page


def test_verify_and_optimize_word_a_syntax_error_alike(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef launch(x:\n    return x\n")
    env = cli_env(tmp_path / "runs")
    opt = subprocess.run([exe(), "optimize", str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    ver = subprocess.run([exe(), "verify", str(EXAMPLES / "add_tiny_block.py"), str(bad), "--backend",
                          "interpreter"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    line = f"tritondx: error: {bad}: syntax error at line 3: '(' was never closed"
    assert opt.stderr.strip() == line and ver.stderr.strip() == line, (opt.stderr, ver.stderr)
    assert opt.returncode == ver.returncode == 2
