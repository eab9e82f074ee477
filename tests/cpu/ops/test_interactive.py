"""--interactive through a pseudo-terminal: approve, reject and edit rewrites, accept the final kernel;
then the saved run's history, state, replay and fork (tritondx history/show/replay)."""

import json
import re
import sqlite3

import pytest

from tritondx.errors import TritonDXError
from tritondx.replay import history, show

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def session(tmp_path_factory, ops):
    pexpect = pytest.importorskip("pexpect")
    tmp = tmp_path_factory.mktemp("interactive")
    editor = tmp / "editor.py"
    editor.write_text(ops.EDITOR_SCRIPT)
    out = tmp / "runs" / "hitl"
    child = ops.spawn(["optimize", str(ops.EXAMPLES / "add_tiny_block.py"), "--backend", "interpreter",
                       "--max-rounds", "2", "--interactive", "--out", str(out)], ops.cli_env(tmp / "runs", editor),
                      tmp, tmp / "transcript.txt")
    screens = []
    # round 1 proposes four launch configurations: accept, reject, edit, reject; then the final approval
    for key in ["a", "r", "e", "r", "a"]:
        child.expect(ops.PROMPT)
        screens.append(ANSI.sub("", child.before))
        child.sendline(key)
    child.expect(pexpect.EOF)
    child.close()
    return {"tmp": tmp, "out": out, "exit": child.exitstatus, "screens": screens,
            "transcript": ANSI.sub("", (tmp / "transcript.txt").read_text())}


def test_interactive_approve_reject_edit(session):
    assert session["exit"] == 0, session["transcript"][-3000:]
    first = session["screens"][0]
    # the evidence that motivated the rewrite, with the source line, and the diff against the current best
    assert "rewrite r1c1" in first and "tiny_block" in first and "line 26" in first
    assert "-    BLOCK = 128" in first and "+    BLOCK = 1024" in first and "current best" in first
    assert "final approval: best kernel r1c1" in session["screens"][4]
    out = session["out"]
    report = json.loads((out / "report.json").read_text())
    cands = {c["id"]: c for c in report["candidates"]}
    assert cands["r1c1"]["verified"] is True
    assert cands["r1c2"]["rejection"] == "rejected_by_human" and cands["r1c4"]["rejection"] == "rejected_by_human"
    # the edited candidate is the person's source (BLOCK = 512), verified like any other
    assert cands["r1c3"]["path"].endswith(".edited.py") and cands["r1c3"]["verified"] is True
    assert "BLOCK = 512" in open(cands["r1c3"]["path"]).read()
    assert "BLOCK = 4096" in (out / "candidates" / "r1c3_launch_config.py").read_text()
    human = [(d["node"], d["decision"], d.get("candidate")) for d in report["decisions"]
             if d["node"] in ("approval", "final_approval")]
    assert human == [("approval", "accept", "r1c1"), ("approval", "reject", "r1c2"), ("approval", "edit", "r1c3"),
                     ("approval", "reject", "r1c4"), ("final_approval", "accept", "r1c1")]
    assert report["best"]["id"] == "r1c1" and (out / "optimized_task.py").exists()
    assert (out / "report.html").exists() and "rejected by a person" in (out / "report.html").read_text()


def test_runs_history_show(session, cli):
    runs = session["tmp"] / "runs"
    r = cli("runs", runs=runs)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("hitl ")][0]
    assert "axpy_tiny_block" in line and "done" in line and "r1c1" in line
    r = cli("history", "hitl", runs=runs)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[1:]]
    assert "(asked a person)" in r.stdout
    nodes = [row[2] for row in rows]
    assert nodes[:5] == ["(input)", "__start__", "triage", "tuner", "rewriter"]   # the tuner: no GPU, no winner
    assert "approval" in nodes and nodes[-3:] == ["select", "final_approval", "report"]
    assert [row[0] for row in rows] == [str(i) for i in range(-1, len(rows) - 1)]
    assert {row[3] for row in rows} >= {"triage", "profile"}  # highest tier so far
    con = sqlite3.connect(session["out"] / "checkpoints.sqlite")
    assert len(rows) == con.execute("select count(*) from checkpoints").fetchone()[0]
    after_round = [row for row in rows if row[2] == "select"][0]
    r = cli("show", str(session["out"]), "--checkpoint", after_round[1], runs=runs)
    assert r.returncode == 0, r.stderr
    assert "written by select; next: profiler" in r.stdout
    assert "tiny_block" in r.stdout and "r1c2 round 1" in r.stdout and "rejected (rejected_by_human)" in r.stdout
    assert "escalate to profile" in r.stdout
    with pytest.raises(TritonDXError, match="not found"):
        show(session["out"], "nope")


def test_fork_branches_a_new_run(session, cli):
    runs = session["tmp"] / "runs"
    hist = history(session["out"])
    cp = [h["checkpoint_id"] for h in hist if h["node"] == "select"][0]  # after round 1, before the profiler
    fork_dir = runs / "forked"
    # fork: force the profile tier next, never go past it, one more round; the final approval is answered on stdin
    r = cli("replay", "hitl", "--checkpoint", cp, "--fork", "--tier", "profile", "--stop-after-tier", "profile",
            "--max-rounds", "3", "--backend", "interpreter", "--out", str(fork_dir), input="a\n", runs=runs)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"forked from checkpoint {cp}" in r.stdout
    meta = json.loads((fork_dir / "run.json").read_text())
    assert meta["forked_from"]["checkpoint_id"] == cp and meta["config"]["max_rounds"] == 3
    assert meta["thread_id"] == "forked"
    rep = json.loads((fork_dir / "report.json").read_text())
    assert rep["rounds"] == 2 and rep["best"]["id"] == "r1c1" and rep["tiers_used"] == ["triage", "profile"]
    assert rep["best"]["path"].startswith(str(fork_dir))  # the state's files were copied into the new folder
    last = [d for d in rep["decisions"] if d["node"] == "select"][-1]
    assert last["decision"] == "__end__" and last["reason"].startswith("no tier left")  # --stop-after-tier profile
    # the new thread starts at the forked state (update_state as the select node), not from the input
    hist2 = history(fork_dir)
    assert hist2[0]["node"] == "(fork)" and hist2[0]["next"] == "profiler" and hist2[1]["node"] == "profiler"
    # the original run is untouched
    assert len(history(session["out"])) == len(hist)


def test_replay_reexecutes_from_checkpoint(session, cli):
    runs = session["tmp"] / "runs"
    hist = history(session["out"])
    before = len(hist)
    cp = [h["checkpoint_id"] for h in hist if h["node"] == "rewriter"][-1]  # round 2's rewrite, next: approval
    r = cli("replay", "hitl", "--checkpoint", cp, input="r\n", runs=runs)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"replayed from checkpoint {cp}" in r.stdout
    # same thread: new checkpoints branch from the chosen one; this time the person rejected the best kernel
    rep = json.loads((session["out"] / "report.json").read_text())
    assert rep["best"]["id"] == "initial" and rep["decisions"][-1]["decision"] == "reject"
    assert [h["node"] for h in history(session["out"])][-2:] == ["final_approval", "report"]
    assert "(replay)" in [h["node"] for h in history(session["out"])]  # an in-place replay, not a fork
    con = sqlite3.connect(session["out"] / "checkpoints.sqlite")
    assert con.execute("select count(*) from checkpoints").fetchone()[0] > before
    r = cli("replay", "hitl", "--checkpoint", cp, "--max-rounds", "4", runs=runs)
    assert r.returncode != 0 and "--fork" in r.stderr

