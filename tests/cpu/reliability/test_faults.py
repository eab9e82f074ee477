"""Faults survived inside real runs (CPU, Triton interpreter):

- candidates that write out of bounds, hang, exhaust memory, return NaN or do not compile, all in one `optimize`
  run: the run finishes, the report records each failure class, the honest candidate wins;
- `tritondx optimize` killed with SIGKILL after its first candidate round is checkpointed, then
  `tritondx resume RUN`: the candidates verified before the kill are in the final report and were not
  verified again; no sandbox job outlived the killed run;
- `tritondx batch` killed with kill -9 mid-way, then run again: finished tasks are not redone (their
  results.json entries and run folders are untouched), the interrupted one is resumed;
- the checkpoint database held under an EXCLUSIVE lock by another process for a few seconds: the run
  waits for it and finishes.

LLM endpoint faults (timeouts, 429/5xx, malformed replies, auth errors) are covered in tests/cpu/llm.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tdx_rel import (CANDIDATES, ROOT, TASK, Case, base_env, cli_cmd, latest_state, log_events,
                     processes_with_env, run_cli, wait_for)

HERE = Path(__file__).resolve().parent
BATCH_SUITE = HERE / "batch_suite"
HANG_TIMEOUT_S = "60"  # verify timeout of the fault run: the hanging candidate is killed after this


# ---------------------------------------------------------------------------------------------------
# Candidates that crash, hang, exhaust memory, return NaN, do not compile: one real optimize run.

def _fault_run(tmp: Path):
    env = base_env(tmp, TRITONDX_TEST_CANDIDATES=str(CANDIDATES), TRITONDX_VERIFY_TIMEOUT=HANG_TIMEOUT_S)
    # --accept-unmeasured: without timing the honest candidate becomes the result only when asked for
    r = run_cli("optimize", str(TASK), "--backend", "interpreter", "--out", str(tmp / "run"), "--max-rounds", "1",
                "--accept-unmeasured",
                tmp=tmp, env=env, driver=True, timeout=500)
    return r, tmp / "run"


FAULT_RUN = Case("fault-run", _fault_run, cost=100)

# candidate file -> the rejection class the report must record, and a piece of the reason
EXPECTED_FAILURES = {
    # its kernel's unmasked store far past the output: stopped by the interpreter's bounds checks
    "c2_out_of_bounds": ("out_of_bounds", "store out of bounds in kernel axpy_kernel"),
    "c3_hang": ("timeout", f"did not finish within {HANG_TIMEOUT_S} s"),
    "c4_out_of_memory": ("out_of_memory", "ran out of memory"),
    "c5_nan": ("mismatch", "NaN/Inf where the reference is finite"),
    "c6_compile_error": ("compile_error", "power of 2"),
}


@pytest.mark.parametrize("rcase", [FAULT_RUN], ids=["fault-run"])
def test_faulty_candidates_in_a_real_run(rcase, rel_outcomes):
    r, run_dir = rel_outcomes[rcase.id].result()
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((run_dir / "report.json").read_text())
    by_file = {c["params"]["file"][:-3]: c for c in report["candidates"]}
    assert set(by_file) == {p.stem for p in CANDIDATES.glob("*.py")}
    for stem, (klass, reason) in EXPECTED_FAILURES.items():
        c = by_file[stem]
        assert c["verified"] is False and c["rejection"] == klass, f"{stem}: {c['rejection']}: {c['reason']}"
        assert reason in (c["reason"] or ""), f"{stem}: {c['reason']!r} lacks {reason!r}"
    honest = by_file["c1_honest"]
    assert honest["verified"] is True and report["best"]["id"] == honest["id"]
    assert (run_dir / "optimized_task.py").read_text() == (CANDIDATES / "c1_honest.py").read_text()
    md = (run_dir / "report.md").read_text()
    for klass, _ in EXPECTED_FAILURES.values():
        assert f"no ({klass})" in md
    verified = [e for e in log_events(run_dir) if e.get("event") == "verified"]
    assert len(verified) == len(by_file)


# ---------------------------------------------------------------------------------------------------
# SIGKILL in the middle of a single run, then `tritondx resume`.

ROUNDS = os.pathsep.join(str(HERE / "rounds" / r) for r in ("r1", "r2"))  # two honest candidates per round


def _killed_then_resumed(tmp: Path):
    run_dir = tmp / "run"
    marker = f"kill-{uuid.uuid4().hex}"
    # TRITONDX_JOB_* variables reach the sandboxed jobs: the marker finds them in /proc afterwards
    env = base_env(tmp, TRITONDX_TEST_CANDIDATES=ROUNDS, TRITONDX_JOB_MARK=marker)
    proc = subprocess.Popen(cli_cmd("optimize", str(TASK), "--backend", "interpreter", "--out", str(run_dir),
                                    "--max-rounds", "2", driver=True),
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Round 1 verified and checkpointed, round 2 proposed and checkpointed: kill while round 2 is
        # being verified.
        def round_two_pending():
            st = latest_state(run_dir / "checkpoints.sqlite", run_dir.name)
            return st if st and st[0].get("verifications") and any(
                p.startswith("r2") for p in st[0].get("pending") or []) else None
        values, _ = wait_for(round_two_pending, 400, "round 2's checkpoint", proc, every=0.1)
        jobs_before = wait_for(lambda: [p for p in processes_with_env(marker) if p != proc.pid], 60,
                               "round 2's verify jobs", proc, every=0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(2.0)  # the kernel delivers the parent-death signals
    orphans = processes_with_env(marker)
    before = {v["id"]: v for v in values["verifications"]}
    resumed = run_cli("resume", str(run_dir), tmp=tmp, env=base_env(tmp, TRITONDX_TEST_CANDIDATES=ROUNDS),
                      timeout=500, driver=True)
    return proc.returncode, before, jobs_before, orphans, resumed, run_dir


SIGKILL = Case("sigkill-resume", _killed_then_resumed, cost=90)


@pytest.mark.parametrize("rcase", [SIGKILL], ids=["sigkill-resume"])
def test_sigkill_mid_run_then_resume_loses_nothing(rcase, rel_outcomes):
    rc, before, jobs_before, orphans, resumed, run_dir = rel_outcomes[rcase.id].result()
    assert rc == -signal.SIGKILL
    assert before and all(i.startswith("r1") for i in before), before
    assert jobs_before, "no sandbox job was running at the kill"
    assert orphans == [], f"sandbox jobs outlived the killed run: {orphans} (before the kill: {jobs_before})"
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = json.loads((run_dir / "report.json").read_text())
    cands = {c["id"]: c for c in report["candidates"]}
    for cid, v in before.items():  # everything verified before the kill is in the final report, as it was
        assert cid in cands and cands[cid]["verified"] == v["passed"], (cid, cands.get(cid), v)
    assert report["rounds"] == 2 and report["status"] == "done"
    r2 = [c for c in cands.values() if c["round"] == 2]  # the round the kill interrupted, finished after resume
    assert len(r2) == 2 and all(c["verified"] is True for c in r2), r2
    events = log_events(run_dir)
    assert sum(e.get("event") == "triaged" for e in events) == 1, "triage ran again after the resume"
    for cid in before:  # and none of it was verified again
        assert sum(e.get("event") == "verified" and e.get("candidate") == cid for e in events) == 1, cid


# ---------------------------------------------------------------------------------------------------
# `tritondx batch` killed with kill -9 mid-way, then run again.

def _tree_mtimes(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in sorted(folder.rglob("*")) if p.is_file()}


def _batch_killed_then_resumed(tmp: Path):
    out = tmp / "batch"
    marker = f"batch-{uuid.uuid4().hex}"
    args = ("batch", str(BATCH_SUITE), "--backend", "interpreter", "--out", str(out), "--max-rounds", "1")
    # what the batch's runs verify is not what this tests: the no-op verifier (tools/verify/interface.py) checks
    # nothing, so no judge job runs beside them
    env = base_env(tmp, TRITONDX_CANDIDATES_PER_ROUND="1", TRITONDX_JOB_MARK=marker, TRITONDX_VERIFIER="noop")
    proc = subprocess.Popen(cli_cmd(*args), cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        def first_done():
            f = out / "results.json"
            if not f.exists():
                return None
            try:
                res = json.loads(f.read_text())["results"]
            except ValueError:
                return None
            return res if any(r.get("status") == "done" for r in res) else None
        results = wait_for(first_done, 400, "the first finished task in results.json", proc, every=0.1)
        done = {r["task"]: r for r in results if r["status"] == "done"}
        mtimes = {t: _tree_mtimes(out / "runs" / t) for t in done}
        os.kill(proc.pid, signal.SIGKILL)  # kill -9 the batch process alone, as an OOM killer would
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(2.0)
    orphans = processes_with_env(marker)
    killed_results = json.loads((out / "results.json").read_text())["results"]
    again = run_cli(*args, tmp=tmp, env=base_env(tmp, TRITONDX_CANDIDATES_PER_ROUND="1", TRITONDX_VERIFIER="noop"),
                    timeout=600)
    final = json.loads((out / "results.json").read_text())["results"]
    return proc.returncode, done, mtimes, killed_results, orphans, again, final, out


BATCH = Case("batch-kill9-resume", _batch_killed_then_resumed, cost=95)


@pytest.mark.parametrize("rcase", [BATCH], ids=["batch-kill9-resume"])
def test_batch_kill9_then_resume_redoes_nothing_finished(rcase, rel_outcomes):
    rc, done, mtimes, killed_results, orphans, again, final, out = rel_outcomes[rcase.id].result()
    assert rc == -signal.SIGKILL
    assert done and len(done) < 3, f"the kill came too late to test anything: {sorted(done)}"
    assert orphans == [], f"processes of the killed batch kept running: {orphans}"
    assert again.returncode == 0, again.stderr[-3000:]
    by_task = {}
    for r in final:
        assert r["task"] not in by_task, f"{r['task']} listed twice"
        by_task[r["task"]] = r
    assert set(by_task) == {"b1_axpy", "b2_axpy", "b3_axpy"}
    assert all(r["status"] == "done" for r in final), [(r["task"], r["status"], r.get("stderr_tail")) for r in final]
    for task, entry in done.items():  # not redone: the same entry, the same files, untouched
        assert by_task[task] == entry
        assert _tree_mtimes(out / "runs" / task) == mtimes[task], f"{task}'s run folder was touched"
    for task, r in by_task.items():  # each run folder holds one run (no second run merged into it)
        report = json.loads((out / "runs" / task / "report.json").read_text())
        ids = [c["id"] for c in report["candidates"]]
        assert len(ids) == len(set(ids)) and report["tiers_used"].count("triage") == 1


# ---------------------------------------------------------------------------------------------------
# The checkpoint database locked by another process for a few seconds.

LOCK_MAX_S = 90.0  # longer than SQLite's 30 s busy timeout: the retry (tools/run/checkpoint_retry.py) covers it
LOCKER = """
import sqlite3, sys, time, select
con = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", time.time(), flush=True)
select.select([sys.stdin], [], [], float(sys.argv[2]))   # until the test says so (or the cap)
con.execute("COMMIT")
print("released", time.time(), flush=True)
"""


def _checkpoint_rows(db: Path) -> int:
    import sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("select count(*) from checkpoints").fetchone()[0]
    finally:
        con.close()


def _event_times(run_dir: Path, names: tuple[str, ...]) -> list[float]:
    from datetime import datetime
    return [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            for e in log_events(run_dir) if e.get("event") in names and e.get("timestamp")]


def _locked_db(tmp: Path):
    run_dir = tmp / "run"
    db = run_dir / "checkpoints.sqlite"
    env = base_env(tmp, TRITONDX_CANDIDATES_PER_ROUND="1", TRITONDX_VERIFIER="noop")   # the checkpoints are tested
    proc = subprocess.Popen(cli_cmd("optimize", str(TASK), "--backend", "interpreter", "--out", str(run_dir),
                                    "--max-rounds", "1"),
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    locker = None
    try:
        wait_for(lambda: latest_state(db, run_dir.name), 400, "the first checkpoint", proc, every=0.05)
        locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(LOCK_MAX_S)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        locked = float(locker.stdout.readline().split()[1])
        rows_locked = _checkpoint_rows(db)
        # hold the lock until a node has finished (its checkpoint write is now waiting), and a bit more
        wait_for(lambda: [t for t in _event_times(run_dir, ("triaged", "proposed", "decided")) if t >= locked],
                 LOCK_MAX_S - 10, "a node to finish while the database is locked", proc)
        time.sleep(2.0)
        rows_before_release = _checkpoint_rows(db)
        out, err = locker.communicate("release\n", timeout=60)
        released = float(out.split()[1])
        out, err = proc.communicate(timeout=500)
    finally:
        for p in (proc, locker):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    return proc.returncode, err, locked, released, rows_locked, rows_before_release, run_dir


LOCKED = Case("locked-checkpoint-db", _locked_db, cost=45)


@pytest.mark.parametrize("rcase", [LOCKED], ids=["locked-checkpoint-db"])
def test_locked_checkpoint_database_is_waited_for(rcase, rel_outcomes):
    rc, err, locked, released, rows_locked, rows_before_release, run_dir = rel_outcomes[rcase.id].result()
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err and "internal error" not in err
    # nothing was written while the lock was held, although a node had finished in that time ...
    assert rows_before_release == rows_locked
    assert any(locked <= t <= released for t in _event_times(run_dir, ("triaged", "proposed", "decided")))
    # ... and the run went on once it was released, to the end
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "done" and report["candidates"]
    assert _checkpoint_rows(run_dir / "checkpoints.sqlite") > rows_locked


def test_checkpoint_write_retries_past_the_busy_timeout(tmp_path, monkeypatch):
    """A lock held longer than SQLite's busy timeout: the write is retried (and logged), not lost."""
    import sqlite3

    import structlog
    from langgraph.checkpoint.base import empty_checkpoint

    from tritondx.tools.run.checkpoint_retry import PatientSqliteSaver
    monkeypatch.setenv("TRITONDX_CHECKPOINT_PATIENCE_S", "60")
    db = tmp_path / "checkpoints.sqlite"
    saver = PatientSqliteSaver(sqlite3.connect(db, check_same_thread=False, timeout=0.2))
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"step": -1}, {})  # creates the tables
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), "3"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().startswith("locked")
        t0 = time.monotonic()
        with structlog.testing.capture_logs() as logs:
            saver.put(config, empty_checkpoint(), {"step": 0}, {})
        waited = time.monotonic() - t0
    finally:
        locker.kill()
        locker.wait()
    assert waited >= 1.0, "the write did not wait for the lock"
    assert any(e["event"] == "checkpoint_db_locked" for e in logs)
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 2
