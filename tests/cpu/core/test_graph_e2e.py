"""The six-agent graph end to end on the interpreter, through the CLI, as a user runs it."""

import json
import sqlite3
from pathlib import Path

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"


def test_optimize_writes_verified_kernel_report_and_checkpoints(cli, tmp_path):
    out = tmp_path / "run"
    r = cli("optimize", str(EXAMPLES / "add_tiny_block.py"), "--backend", "interpreter", "--out", str(out),
            "--max-rounds", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["speed"] == "not measured" and report["speedup"] is None
    # no device on the interpreter: the ledger holds no device seconds (the tuner's job counted none either)
    assert report["cost"].get("device:jobs", 0.0) == 0.0 and report["cost"].get("device:held", 0.0) == 0.0
    assert report["tiers_used"][0] == "triage" and "profile" in report["tiers_used"]
    # no timing: no candidate is claimed faster, the result is the initial kernel (tools/verify/select_untimed.py);
    # the verified candidates are listed as awaiting timing, and the report says how the result was chosen
    best = report["best"]
    passed = [c for c in report["candidates"] if c["verified"]]
    assert passed and all(c["motivated_by"] for c in report["candidates"])
    assert best["id"] == "initial" and best["awaiting_timing"] == [c["id"] for c in passed]
    assert (out / "optimized_task.py").read_text() == (EXAMPLES / "add_tiny_block.py").read_text()
    md = (out / "report.md").read_text()
    assert "speed not measured" in md and "tiny_block" in md and "the result is the initial kernel" in md
    assert "## Closed findings" in md and {r["status"] for r in report["closure"]} <= {"fixed", "tried", "open"}
    con = sqlite3.connect(out / "checkpoints.sqlite")
    n = con.execute("select count(*) from checkpoints").fetchone()[0]
    assert n >= 5
    assert report["checkpoint_db_bytes"] < 20 * 2 ** 20
    logs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    nodes = {e.get("node") for e in logs}
    assert {"triage", "rewriter", "verifier"} <= nodes
    assert all(e.get("thread_id") == out.name for e in logs if e.get("node"))
    decisions = [d for d in report["decisions"] if d["node"] == "select"]
    assert decisions and "speed not measured" in decisions[0]["reason"]


def test_diagnose_prints_findings_with_ir_and_source_lines(cli, tmp_path):
    out = tmp_path / "diag"
    r = cli("diagnose", str(EXAMPLES / "matmul_no_dot.py"), "--backend", "interpreter", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mul_sum_dot" in r.stdout and "mma_v2_not_wgmma" in r.stdout and "IR:" in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["tiers_used"] == ["triage", "profile", "ir", "compiler"]
    assert not (out / "optimized_task.py").exists()
    tiers = {f["tier"] for f in report["findings"]}
    assert {"triage", "ir", "compiler"} <= tiers
    # big artifacts are files referenced by path and hash, not copied into the state
    arts = report["artifacts"]
    assert any(a["kind"] == "passes" for a in arts.values())
    for a in arts.values():
        assert Path(a["path"]).exists() and len(a["sha256"]) == 64


def test_bad_task_one_line_error(cli, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text((EXAMPLES / "add_tiny_block.py").read_text().replace("def reference(", "def ref("))
    r = cli("optimize", str(bad), "--backend", "interpreter")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and "no reference" in lines[0]
    assert "Traceback" not in r.stderr
