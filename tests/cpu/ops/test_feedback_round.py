"""--interactive feedback mid-round keeps what the person approved or edited: `a` on r1c1, `r` on r1c2, `e`
on r1c3, `f` on r1c4. r1c1 and the edited r1c3 are verified, r1c4 is dropped (saying why), the report's
candidates agree with the decisions, the offline expert says it could not use the note, and a line per round
says which candidates passed."""

import json
import re

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NOTE = "keep BLOCK a power of two"


@pytest.fixture(scope="module")
def run(tmp_path_factory, ops):
    pexpect = pytest.importorskip("pexpect")
    tmp = tmp_path_factory.mktemp("feedback")
    editor = tmp / "editor.py"
    editor.write_text(ops.EDITOR_SCRIPT)
    out = tmp / "runs" / "fb"
    child = ops.spawn(["optimize", str(ops.EXAMPLES / "add_tiny_block.py"), "--backend", "interpreter",
                       "--max-rounds", "2", "--interactive", "--out", str(out)], ops.cli_env(tmp / "runs", editor),
                      tmp, tmp / "transcript.txt")
    for key in ["a", "r", "e", "f"]:
        child.expect(ops.PROMPT)
        child.sendline(key)
    child.expect("feedback for the rewriter")
    child.sendline(NOTE)
    while child.expect([ops.PROMPT, pexpect.EOF]) == 0:
        final = "final approval" in ANSI.sub("", child.before)
        child.sendline("a" if final else "r")  # reject round 2's proposals, accept the best kernel
    child.close()
    transcript = ANSI.sub("", (tmp / "transcript.txt").read_text())
    assert child.exitstatus == 0, transcript[-3000:]
    return {"out": out, "transcript": transcript, "report": json.loads((out / "report.json").read_text()),
            "log": [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]}


def test_feedback_keeps_approved_and_edited_candidates(run):
    cands = {c["id"]: c for c in run["report"]["candidates"]}
    assert cands["r1c1"]["verified"] is True and cands["r1c1"]["rejection"] is None
    # the edit is the person's source, and it was verified
    assert cands["r1c3"]["path"].endswith(".edited.py") and "BLOCK = 512" in open(cands["r1c3"]["path"]).read()
    assert cands["r1c3"]["verified"] is True
    assert cands["r1c2"]["rejection"] == "rejected_by_human"
    assert cands["r1c4"]["rejection"] == "dropped_for_feedback" and "feedback" in cands["r1c4"]["reason"]
    verified = {e["candidate"] for e in run["log"] if e.get("event") == "verified"}
    assert {"r1c1", "r1c3"} <= verified and not {"r1c2", "r1c4"} & verified
    human = [(d["decision"], d["candidate"]) for d in run["report"]["decisions"] if d["node"] == "approval"
             and d["round"] == 1]
    assert human == [("accept", "r1c1"), ("reject", "r1c2"), ("edit", "r1c3"), ("feedback", "r1c4")]
    # the verifier went back to the rewriter for the round the person asked for
    first = [d for d in run["report"]["decisions"] if d["node"] == "select"][0]
    assert first["decision"] == "rewriter" and "feedback" in first["reason"]
    assert run["report"]["best"]["id"] == "r1c1" and run["report"]["rounds"] == 2


def test_offline_expert_says_it_could_not_use_the_note(run):
    events = [e["event"] for e in run["log"]]
    assert "human_feedback_used" not in events and "human_feedback_noted" in events
    (noted,) = [d for d in run["report"]["decisions"] if d["node"] == "rewriter"]
    assert noted["decision"] == "feedback_noted" and noted["round"] == 2
    assert "offline expert cannot use free-text feedback" in noted["reason"] and NOTE in noted["reason"]


def test_a_line_per_round_says_which_passed(run):
    line = [ln for ln in run["transcript"].splitlines() if "round_checked" in ln][0]
    assert "select round 1 round_checked passed=[r1c1, r1c3]" in line
    assert len(line) <= 160
