"""Headless batch at scale: one worker per local GPU (scheduling checked on CPU with fake GPUs and a fake
task process), and the same batch on a real local Ray instance through the CLI, resumable."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritondx import batch, batch_scale

SUITE = Path(__file__).resolve().parents[1] / "reliability" / "batch_suite"  # three tiny axpy tasks


def test_visible_gpus(monkeypatch, tmp_path):
    monkeypatch.delenv(batch_scale.FAKE_GPUS_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5,-1,7")
    assert batch_scale.visible_gpus("cuda") == ["2", "5"]  # CUDA stops at the first invalid id
    assert batch_scale.visible_gpus("interpreter") == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert batch_scale.visible_gpus("cuda") == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi = tmp_path / "nvidia-smi"  # `nvidia-smi -L` of a 2-GPU host, one of them split into MIG slices
    smi.write_text("#!/bin/sh\n[ \"$1\" = -L ] || exit 3\ncat <<'EOF'\n"
                   "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n"
                   "  MIG 1g.18gb     Device  0: (UUID: MIG-cccc)\nEOF\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert batch_scale.visible_gpus("cuda") == ["0", "1"]
    monkeypatch.setenv(batch_scale.FAKE_GPUS_ENV, "3")
    assert batch_scale.visible_gpus("interpreter") == ["0", "1", "2"]


def test_plan_slots(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITONDX_LOCK_DIR", raising=False)
    one = batch_scale.plan_slots(["0"], 2, tmp_path)
    assert one == [{"TRITONDX_LOCK_DIR": str(tmp_path / ".locks")}] * 2  # one GPU: as before
    assert batch_scale.plan_slots([], 1, tmp_path) == [{"TRITONDX_LOCK_DIR": str(tmp_path / ".locks")}]
    many = batch_scale.plan_slots(["0", "3"], 2, tmp_path)
    assert [s["CUDA_VISIBLE_DEVICES"] for s in many] == ["0", "3", "0", "3"]
    assert {s["CUDA_VISIBLE_DEVICES"]: s["TRITONDX_LOCK_DIR"] for s in many} == {
        "0": str(tmp_path / "locks" / "gpu0"), "3": str(tmp_path / "locks" / "gpu3")}
    # a caller's lock folder (e.g. other work on the same GPU) is shared, per GPU below it when several
    monkeypatch.setenv("TRITONDX_LOCK_DIR", str(tmp_path / "shared"))
    assert batch_scale.plan_slots(["0"], 1, tmp_path) == [{"TRITONDX_LOCK_DIR": str(tmp_path / "shared")}]
    assert batch_scale.plan_slots(["0", "1"], 1, tmp_path)[1]["TRITONDX_LOCK_DIR"] == str(tmp_path / "shared" / "gpu1")


FAKE_TASK_PROCESS = """
#!{python}
# Stands in for `python -m tritondx.cli optimize TASK --out DIR ...`: records the environment it got and
# when it ran, then exits 0 (no report: the batch records the task as done, speed not measured).
import json, os, sys, time
args = sys.argv[1:]
out = args[args.index("--out") + 1]
t0 = time.time()
time.sleep({sleep})
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "fake.json"), "w") as f:
    json.dump({{"task": os.path.basename(args[3]), "start": t0, "end": time.time(), "argv": args,
               "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "lock": os.environ.get("TRITONDX_LOCK_DIR"),
               "url": os.environ.get("TRITONDX_CHECKPOINT_URL")}}, f)
"""


def _fake_batch(tmp_path, monkeypatch, n_tasks, gpus, workers, sleep=0.6, **kw):
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    for i in range(n_tasks):
        (suite / f"t{i}.py").write_text("# a task file; the fake task process never reads it\n")
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_TASK_PROCESS.format(python=sys.executable, sleep=sleep).lstrip())
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(fake))  # run_one starts `sys.executable -m tritondx.cli ...`
    if gpus is None:
        monkeypatch.delenv(batch_scale.FAKE_GPUS_ENV, raising=False)
    else:
        monkeypatch.setenv(batch_scale.FAKE_GPUS_ENV, str(gpus))
    out = tmp_path / "out"
    agg = batch.run_batch(str(suite), str(out), backend="interpreter", workers=workers, progress=False, **kw)
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("runs/*/fake.json"))]
    return agg, runs, out


def _max_overlap(intervals):
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def test_one_worker_per_gpu_fake_gpus(tmp_path, monkeypatch):
    url = "postgresql://tdx:hunter2-secret@127.0.0.1:1/x"
    agg, runs, out = _fake_batch(tmp_path, monkeypatch, n_tasks=7, gpus=3, workers=2, checkpoint_url=url)
    assert agg["tasks"] == 7 and agg["failed"] == 0
    assert sorted(r["task"] for r in runs) == [f"t{i}.py" for i in range(7)]  # each task ran once
    by_gpu: dict = {}
    for r in runs:
        assert r["gpu"] in {"0", "1", "2"}
        assert r["lock"] == str(out / "locks" / f"gpu{r['gpu']}")  # each GPU its own lock folder
        assert r["url"] == url and url not in " ".join(r["argv"])  # through the environment, not argv
        by_gpu.setdefault(r["gpu"], []).append((r["start"], r["end"]))
    assert len(by_gpu) == 3  # the tasks were spread over every GPU
    assert all(_max_overlap(iv) <= 2 for iv in by_gpu.values())  # --workers per GPU, never more
    assert _max_overlap([iv for ivs in by_gpu.values() for iv in ivs]) > 2  # and the GPUs worked at once
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["gpus"] == ["0", "1", "2"]
    assert {r["task"]: r["gpu"] for r in results["results"]} == {r["task"][:-3]: r["gpu"] for r in runs}
    assert "hunter2" not in (out / "results.json").read_text()
    # run again: every task is done, nothing is redone
    before = {p: p.stat().st_mtime for p in out.glob("runs/*/fake.json")}
    agg2, runs2, _ = _fake_batch(tmp_path, monkeypatch, n_tasks=7, gpus=3, workers=2)
    assert agg2["tasks"] == 7 and {p: p.stat().st_mtime for p in out.glob("runs/*/fake.json")} == before


def test_single_gpu_keeps_the_old_behaviour(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    agg, runs, out = _fake_batch(tmp_path, monkeypatch, n_tasks=4, gpus=None, workers=2, sleep=0.4)
    assert agg["tasks"] == 4 and len(runs) == 4
    assert all(r["gpu"] is None and r["lock"] == str(out / ".locks") for r in runs)  # nothing pinned
    assert _max_overlap([(r["start"], r["end"]) for r in runs]) == 2
    assert "gpus" not in json.loads((out / "results.json").read_text())["meta"]


def test_a_run_still_going_at_the_deadline_is_stopped_and_counted(tmp_path, monkeypatch):
    """At the batch's deadline the runs still going are stopped (their checkpoints stay: the next batch on
    the folder resumes them) and recorded as not finished, so a deadline bounds the batch's wall time and its
    summary covers every task it started (was: in-flight runs went on, and a batch cut by an outer timeout
    left a results.json that named only the tasks that had ended)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    t0 = time.time()
    agg, runs, out = _fake_batch(tmp_path, monkeypatch, n_tasks=4, gpus=None, workers=2, sleep=30, deadline_s=2)
    assert time.time() - t0 < 20
    results = json.loads((out / "results.json").read_text())["results"]
    assert [r["status"] for r in results] == ["not_finished", "not_finished"] and runs == []   # 2 started, 2 skipped
    assert all("tritondx resume" in r["stderr_tail"] for r in results)
    assert agg["not_finished"] == 2 and agg["failed"] == 0


def _cli(*args, env=None, timeout=300, cwd=None):
    return subprocess.run([sys.executable, "-m", "tritondx.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def test_ray_local_batch_end_to_end_and_resume(tmp_path):
    pytest.importorskip("ray", reason="ray not installed (pip install 'tritondx[scale]')")
    out = tmp_path / "batch"
    # the batch inside Ray is tested, not what its runs verify: the no-op verifier (tools/verify/interface.py)
    env = {**os.environ, "TRITONDX_CANDIDATES_PER_ROUND": "1", "TRITONDX_RUNS": str(tmp_path / "runs"),
           "RAY_USAGE_STATS_ENABLED": "0", "TRITONDX_VERIFIER": "noop"}
    env.pop("RAY_ADDRESS", None)
    args = ("batch", str(SUITE), "--only", "b1_axpy,b2_axpy", "--backend", "interpreter", "--out", str(out),
            "--max-rounds", "1", "--workers", "2", "--ray-address", "local")
    # two interpreter runs at once on a 2-core machine that the rest of the suite also loads: 300 s ran out under
    # CI's load once (stop 47, with a judge beside each run) while the batch was still working
    r = _cli(*args, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert res["meta"]["ray"] == "local"
    by = {e["task"]: e for e in res["results"]}
    assert set(by) == {"b1_axpy", "b2_axpy"} and all(e["status"] == "done" for e in by.values()), by
    assert all(e.get("node") and e.get("kernel_class") == "elementwise" for e in by.values())
    # both ran inside Ray tasks at once (--workers 2: a local instance with 2 CPUs, one per task)
    span = {t: (json.loads((out / "runs" / t / "run.json").read_text())["started"],
                (out / "runs" / t / "report.json").stat().st_mtime) for t in by}
    assert span["b1_axpy"][0] < span["b2_axpy"][1] and span["b2_axpy"][0] < span["b1_axpy"][1], span
    assert (out / "runs" / "b1_axpy" / "report.json").exists() and (out / "summary.md").exists()

    # a batch killed after b2's run had checkpointed, before b2 was in results.json: the next batch keeps
    # b1 untouched and continues b2 from its checkpoints (resume), inside Ray again
    b1 = {p: p.stat().st_mtime for p in (out / "runs" / "b1_axpy").rglob("*") if p.is_file()}
    res["results"] = [e for e in res["results"] if e["task"] == "b1_axpy"]
    (out / "results.json").write_text(json.dumps(res))
    (out / "runs" / "b2_axpy" / "report.json").unlink()
    n_candidates = len(list((out / "runs" / "b2_axpy" / "candidates").glob("*.py")))
    r = _cli(*args, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res2 = json.loads((out / "results.json").read_text())
    by2 = {e["task"]: e for e in res2["results"]}
    assert by2["b1_axpy"] == by["b1_axpy"]
    assert by2["b2_axpy"]["status"] == "done" and by2["b2_axpy"]["candidates"] == by["b2_axpy"]["candidates"]
    assert {p: p.stat().st_mtime for p in (out / "runs" / "b1_axpy").rglob("*") if p.is_file()} == b1
    assert (out / "runs" / "b2_axpy" / "report.json").exists()
    assert len(list((out / "runs" / "b2_axpy" / "candidates").glob("*.py"))) == n_candidates  # nothing redone


def test_ray_address_without_ray_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    with pytest.raises(Exception, match=r"tritondx\[scale\]"):
        batch_scale._ray_init("local", "interpreter", 1)


def test_batch_help_lists_scale_options():
    r = _cli("batch", "--help", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0
    for opt in ("--ray-address", "--checkpoint-url", "--workers"):
        assert opt in r.stdout
