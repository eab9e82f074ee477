"""A run paused at the approval prompt survives its terminal: kill the process, `tritondx resume RUN`.
Checkpoints in the run folder's SQLite file, or in PostgreSQL (`--checkpoint-url`, here through
$TRITONDX_CHECKPOINT_URL with a password that must not reach any file, log or output)."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_kill_at_prompt_then_resume_with_feedback(tmp_path, ops, cli, store):
    pexpect = pytest.importorskip("pexpect")
    runs = tmp_path / "runs"
    env = ops.cli_env(runs)
    child = ops.spawn(["optimize", str(ops.EXAMPLES / "add_tiny_block.py"), "--backend", "interpreter",
                       "--max-rounds", "2", "--interactive"], env, tmp_path, tmp_path / "t1.txt")
    child.expect(ops.PROMPT)
    assert "rewrite r1c1" in ANSI.sub("", child.before)
    os.kill(child.pid, signal.SIGKILL)  # the terminal goes away mid-prompt
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == signal.SIGKILL
    (run,) = [d for d in runs.iterdir() if (d / "run.json").exists()]
    assert not (run / "report.json").exists()
    listed = cli("runs", runs=runs)
    assert listed.returncode == 0 and "paused (awaiting approval)" in listed.stdout and run.name in listed.stdout

    # resume by run id (a folder name under runs/): the same request comes back first
    child = ops.spawn(["resume", run.name], env, tmp_path, tmp_path / "t2.txt")
    child.expect(ops.PROMPT)
    assert "rewrite r1c1" in ANSI.sub("", child.before)
    child.sendline("f")  # feedback: drop this round, rewrite with the note
    child.expect("feedback for the rewriter")
    child.sendline("keep BLOCK a power of two and try fewer warps")
    answered = 1
    while child.expect([ops.PROMPT, pexpect.EOF]) == 0:
        child.sendline("r")  # reject whatever the feedback round proposes
        answered += 1
    child.close()
    assert child.exitstatus == 0, ANSI.sub("", (tmp_path / "t2.txt").read_text())[-3000:]
    report = json.loads((run / "report.json").read_text())
    fb = [d for d in report["decisions"] if d["decision"] == "feedback"]
    assert fb and "power of two" in fb[0]["reason"] and fb[0]["node"] == "approval"
    r1 = [c for c in report["candidates"] if c["round"] == 1]
    assert len(r1) == 4 and all(c["rejection"] == "dropped_for_feedback" for c in r1)  # nothing was approved
    later = [c for c in report["candidates"] if c["round"] > 1]
    assert len(later) == answered - 1
    assert all(c["rejection"] == "rejected_by_human" for c in later)
    assert report["best"]["id"] == "initial" and report["status"] == "done"
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    # the rewriter got the note, and says the offline expert could not use it (it names no rewrite family)
    assert any(e.get("event") == "human_feedback_noted" for e in log)
    # a finished run resumes to a no-op that says so
    again = cli("resume", str(run), runs=runs)
    assert again.returncode == 0 and "nothing to resume" in again.stdout
    if store:
        _postgres_run_checks(run, runs, store, cli, [tmp_path / "t1.txt", tmp_path / "t2.txt"], [listed, again])


def _postgres_run_checks(run, runs, url, cli, transcripts, outputs):
    from urllib.parse import urlsplit

    import psycopg
    password = urlsplit(url).password
    assert not (run / "checkpoints.sqlite").exists()
    marker = json.loads((run / "checkpoints.json").read_text())
    assert marker == {"store": "postgres", "url": url.replace(f":{password}@", "@")}
    thread = json.loads((run / "run.json").read_text())["thread_id"]
    with psycopg.connect(url) as c:
        n = c.execute("select count(*) from checkpoints where thread_id = %s", (thread,)).fetchone()[0]
        assert n > 5
        leaked = c.execute("select count(*) from checkpoints where checkpoint::text like %s or metadata::text like %s",
                           (f"%{password}%", f"%{password}%")).fetchone()[0]
        leaked += c.execute("select count(*) from checkpoint_blobs where position(%s in blob) > 0",
                            (password.encode(),)).fetchone()[0]
        leaked += c.execute("select count(*) from checkpoint_writes where position(%s in blob) > 0",
                            (password.encode(),)).fetchone()[0]
        assert leaked == 0
    hist = cli("history", str(run), runs=runs)
    assert hist.returncode == 0 and "final_approval" in hist.stdout, hist.stderr
    outputs.append(hist)
    # without the password (no --checkpoint-url, no PGPASSWORD): one line naming the database, redacted
    import os

    from tritondx.errors import TritonDXError
    from tritondx.replay import history
    env_url = os.environ.pop("TRITONDX_CHECKPOINT_URL")
    try:
        with pytest.raises(TritonDXError, match="cannot connect") as e:
            history(run)
    finally:
        os.environ["TRITONDX_CHECKPOINT_URL"] = env_url
    assert marker["url"] in str(e.value) and password not in str(e.value)
    # ... and with it on the command line
    shown = subprocess.run([*_cli_cmd(), "show", str(run), "--checkpoint-url", url], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "TRITONDX_CHECKPOINT_URL"}, timeout=120)
    assert shown.returncode == 0 and "best: initial" in shown.stdout, shown.stderr
    outputs.append(shown)
    for p in [*run.rglob("*"), *transcripts]:
        if p.is_file():
            assert password.encode() not in p.read_bytes(), p
    for o in outputs:
        assert password not in o.stdout + o.stderr


def _cli_cmd():
    return [sys.executable, "-m", "tritondx.cli"]
