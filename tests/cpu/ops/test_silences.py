"""Issue 38, silences: a run says what is still running when it has printed nothing for a while (a hanging
launch() too, long before the probe's timeout); SIGTERM and Ctrl-C end a run with one line naming the command
that continues it; no temporary folder outlives the process that made it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritondx import cli as tdx_cli
from tritondx.logs import Heartbeat, progress_line

from .conftest import EXAMPLES, cli_env, exe

HANGING_TASK = '''
import time
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x):
    time.sleep(3600)  # never returns
    return x


def reference(x):
    return x.clone()


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(17,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0, "rtol": 0}}
'''


def test_the_heartbeat_names_the_node_and_what_it_does(capsys, monkeypatch):
    from tritondx.logs import setup_logging
    setup_logging(None)
    beat = Heartbeat(every=0.5)
    with beat:
        beat.task_event({"id": "t1", "name": "verifier", "input": {"round": 2, "pending": ["r2c1", "r2c2"],
                                                                   "backend": "interpreter"}})
        time.sleep(1.6)
        beat.task_event({"id": "t1", "name": "verifier", "result": {}})
        err_running = capsys.readouterr().err
        time.sleep(1.2)  # nothing runs: nothing said
    err_after = capsys.readouterr().err
    lines = [ln for ln in err_running.splitlines() if "still running" in ln]
    assert len(lines) >= 2, err_running
    assert "verifier round 2 still running (" in lines[0]
    assert "checking 2 candidate(s) (r2c1, r2c2) under the Triton interpreter" in lines[0]
    assert "still running" not in err_after


def test_a_printed_line_resets_the_silence(capsys):
    import structlog

    from tritondx.logs import setup_logging
    setup_logging(None)
    beat = Heartbeat(every=1.0)
    with beat:
        beat.task_event({"id": "t", "name": "rewriter", "input": {"round": 1}})
        for _ in range(8):  # a line every 0.3 s: never 1 s of silence
            structlog.get_logger("tritondx").info("busy")
            time.sleep(0.3)
    assert "still running" not in capsys.readouterr().err


def test_the_heartbeat_line_is_whole():
    line = progress_line(None, "", {"event": "still_running", "node": "triage", "seconds": 40,
                                    "doing": "running the task once in a sandbox to check it (stopped after 300 s; "
                                             "TRITONDX_PROBE_TIMEOUT sets the limit)"})
    assert line.endswith("triage still running (40 s): running the task once in a sandbox to check it (stopped "
                         "after 300 s; TRITONDX_PROBE_TIMEOUT sets the limit)")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_hanging_launch_talks_and_a_signal_ends_the_run_with_the_resume_command(tmp_path, sig):
    task = tmp_path / "hangs.py"
    task.write_text(HANGING_TASK)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = tmp_path / "run"
    env = {**cli_env(tmp_path / "runs"), "TMPDIR": str(tmp), "TRITONDX_HEARTBEAT_S": "2"}
    # a fresh session with the default SIGINT action, as at a terminal (a background job ignores SIGINT)
    p = subprocess.Popen([sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                          "from tritondx.cli import main; sys.argv[0] = 'tritondx'; main()",
                          "optimize", str(task), "--out", str(run)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                         start_new_session=True)
    try:
        deadline = time.time() + 120
        seen = ""
        while time.time() < deadline:  # the probe job is running once its scratch folder is there
            time.sleep(0.5)
            if list(tmp.glob("tritondx-run-*/tritondx-job-*")):
                break
        assert list(tmp.glob("tritondx-run-*/tritondx-job-*")), "no job started"
        time.sleep(5)  # > 2 heartbeats
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    seen = err
    assert "triage still running (" in seen and "running the task once in a sandbox" in seen, seen
    assert "stopped after 300 s" in seen
    word = "stopped (SIGTERM)" if sig == signal.SIGTERM else "interrupted"
    assert f"tritondx: {word}; continue the run from its last checkpoint with: tritondx resume {run}" in seen, seen
    assert p.returncode == (143 if sig == signal.SIGTERM else 130)
    assert list(tmp.iterdir()) == []  # the job's scratch folder went with the process's temporary folder
    assert (run / "run.json").exists()  # the run stays, to be resumed


def test_a_dead_process_s_temporary_folder_is_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{tdx_cli.TMP_PREFIX}{dead.pid}-abc"
    (stale / "tritondx-job-x").mkdir(parents=True)
    alive = tmp_path / f"{tdx_cli.TMP_PREFIX}{os.getpid()}-def"
    alive.mkdir()
    other = tmp_path / "tritondx-job-foreign"
    other.mkdir()
    gone = tdx_cli.sweep_temp_folders(str(tmp_path))
    assert gone == [str(stale)]
    assert not stale.exists() and alive.exists() and other.exists()


@pytest.mark.slow
def test_a_capture_leaves_no_boot_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**cli_env(tmp_path / "runs"), "TMPDIR": str(tmp)}
    r = subprocess.run([exe(), "capture", "--out", str(tmp_path / "cap"), "--", "python", "-c", "pass"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert "capture" in (r.stdout + r.stderr) or r.returncode in (0, 1, 2)
    assert list(tmp.iterdir()) == [], list(tmp.rglob("*"))[:5]


def test_a_batch_in_a_pipe_says_each_finished_task_and_what_runs(tmp_path, monkeypatch, capsys):
    from tritondx import batch
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("alpha", "beta"):
        (suite / f"{name}.py").write_text("# a task\n")

    def fake_run_one(task, run_dir, backend_name, extra_args, final_rounds, env_extra, not_after=None, detach=False):
        name = Path(task).stem
        time.sleep(2.5 if name == "alpha" else 0.2)
        return {"task": name, "path": task, "status": "done", "exit": 0, "wall_s": 2.5, "speed": "not measured"}

    monkeypatch.setattr(batch, "run_one", fake_run_one)
    monkeypatch.setenv("TRITONDX_HEARTBEAT_S", "1")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    batch.run_batch(str(suite), str(tmp_path / "out"), backend="interpreter", workers=1)
    err = capsys.readouterr().err
    lines = [ln.split(" ", 1)[1] for ln in err.splitlines() if " batch: " in ln]
    assert lines[0].startswith("batch: 2 task(s); results in "), lines
    assert "batch: [1/2] alpha: not measured (2 s)" in lines or "batch: [1/2] alpha: not measured (3 s)" in lines
    assert any(ln.startswith("batch: [2/2] beta: not measured") for ln in lines), lines
    # alpha ran 2.5 s with nothing said: at least one line named it while it ran
    assert any(ln.startswith("batch: 1 running (alpha ") and ln.endswith("; 0/2 finished") for ln in lines), lines


def test_run_program_removes_its_boot_folder(tmp_path, monkeypatch):
    """Called as a library (no CLI temporary folder around it), the capture's boot folder still goes."""
    import tempfile

    from tritondx.tools.intake.capture import run_program
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert run_program([sys.executable, "-c", "pass"], tmp_path / "records") == 0
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
def test_a_stopped_batch_ends_at_once_and_names_the_command_that_continues_it(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "hangs.py").write_text(HANGING_TASK)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "batch"
    env = {**cli_env(tmp_path / "runs"), "TMPDIR": str(tmp), "TRITONDX_HEARTBEAT_S": "2"}
    p = subprocess.Popen([exe(), "batch", str(suite), "--out", str(out), "--backend", "interpreter"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "runs" / "hangs" / "run.json").exists():
            time.sleep(0.5)
        time.sleep(5)  # the task's probe hangs (300 s limit)
        p.terminate()
        t0 = time.time()
        out_text, err = p.communicate(timeout=60)
        took = time.time() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 143 and took < 20, (took, err)
    assert "batch: 1 running (hangs " in err  # a pipe, not a terminal: lines, not a bar
    assert f"tritondx: stopped (SIGTERM); continue the batch (its finished tasks are kept) with: tritondx batch " \
           f"{suite} --out {out}" in err
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
def test_verify_says_it_is_still_checking(tmp_path):
    task = EXAMPLES / "add_tiny_block.py"
    env = {**cli_env(tmp_path / "runs"), "TRITONDX_HEARTBEAT_S": "1"}
    r = subprocess.run([exe(), "verify", str(task), str(task), "--backend", "interpreter"], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(f"verified: {task}")
    assert f"verify still running (" in r.stderr and f"checking {task} against the task's reference" in r.stderr


def test_the_heartbeats_lines_carry_the_runs_thread(tmp_path, capsys):
    """A run's heartbeat lines in log.jsonl carry its graph thread like every node's line (on a slow machine the
    tuner's 15 s silence put a line without it into an end-to-end run's log)."""
    import json

    from tritondx.logs import setup_logging
    log_file = tmp_path / "log.jsonl"
    setup_logging(log_file)
    beat = Heartbeat(every=0.5, thread_id="run-7")
    with beat:
        beat.task_event({"id": "t1", "name": "tuner", "input": {"round": 0}})
        time.sleep(1.2)
        beat.task_event({"id": "t1", "name": "tuner", "result": {}})
    setup_logging(None)
    lines = [json.loads(x) for x in log_file.read_text().splitlines()]
    beats = [e for e in lines if e.get("event") == "still_running"]
    assert beats and all(e["thread_id"] == "run-7" and e["node"] == "tuner" for e in beats), lines
