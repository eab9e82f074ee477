"""Where time goes: seconds per phase in report.json / report.md, and the batch's device-held line."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

from langgraph.types import Command

from tritondx.batch_summary import summarize_task, write_summary
from tritondx.graph import timed
from tritondx.tools.exec.held_sampler import HeldSampler
from tritondx.tools.run import phases
from tritondx.tools.run.phases import NODE, PHASE, Phases, entries, part
from tritondx.tools.report.writer import write_outputs


def test_a_node_phases_add_up_to_its_wall_time():
    def node(state, config, runtime):
        ph = Phases()
        with ph.time("verify"):
            time.sleep(0.2)
        time.sleep(0.1)  # the node's own work: its phase (the graph names it: "select" here)
        return Command(goto="report", update={"cost": entries(ph.seconds)})

    cmd = timed("select", node, "select")({}, {"configurable": {}}, None)
    ph = part(cmd.update["cost"], PHASE)
    assert ph["verify"] >= 0.19 and ph["select"] >= 0.09
    assert abs(sum(ph.values()) - part(cmd.update["cost"], NODE)["select"]) < 0.01


def test_report_json_and_md_carry_the_phases_and_the_batch_sums_them(tmp_path):
    task = tmp_path / "task_initial.py"
    task.write_text("x = 1\n")
    state = {"task_path": str(task), "task_name": "t", "config": {"mode": "optimize"}, "best": {"id": "initial"},
             "cost": {"node:triage": 3.0, "node:verifier": 5.0, "phase:probe": 2.5, "phase:analysis:triage": 0.5,
                      "phase:verify": 4.0, "phase:select": 1.0}}
    state["cost"].update({"device:jobs": 6.0, "device:held": 1.5})
    write_outputs(tmp_path, state, wall=10.0, analysis_nodes=("triage",))
    rep = json.loads((tmp_path / "report.json").read_text())
    ph = part(rep["cost"], PHASE)
    assert ph["probe"] == 2.5 and ph["verify"] == 4.0 and ph["startup"] == 2.0 and "report" in ph
    md = (tmp_path / "report.md").read_text()
    assert "## Where the time went" in md and "| verify | 4.0 | 40% |" in md
    assert set(phases.cpu(rep["cost"])) == {"self", "children", "live"} and phases.cpu(rep["cost"])["self"] > 0
    assert "s in the run's process" in md
    assert "- wall: 10.0 s, device jobs: 6.0 s (holding the device: 1.5 s)" in md
    entry = summarize_task(str(task), tmp_path, 0, 11.0, {"seconds": 3.0, "error": "x"}, "")
    assert entry["cost"]["phase:final_bench"] == 3.0 and entry["cost"]["phase:verify"] == 4.0
    meta = {"suite": "s", "device_held": {"wall_s": 20.0, "devices": 1, "held_s": 12.0, "exclusive_s": 4.0,
                                          "held_fraction": 0.6},
            "host_cpu": {"wall_s": 20.0, "cores": 16, "busy_cpu_s": 240.0, "busy_fraction": 0.75,
                         "children_cpu_s": 200.0}}
    write_summary(tmp_path, [entry, {**entry, "task": "u"}], meta)
    summary = (tmp_path / "summary.md").read_text()
    assert "device held 12 s of 20 s wall (60%); of which exclusive (timing) 4 s" in summary
    assert "| verify | 8.0 |" in summary
    assert "host CPU busy 75% of 16 cores over 20 s (240 CPU-s, all processes)" in summary
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["aggregate"]["device_held"]["held_fraction"] == 0.6 and res["meta"]["device_held"]["held_s"] == 12.0
    agg = res["aggregate"]["cost"]   # the tasks' ledgers summed key by key
    assert agg["phase:verify"] == 8.0 and agg["device:jobs"] == 12.0 and agg["node:triage"] == 6.0
    assert agg["wall"] == 20.0 and agg["analysis"] == 6.0


def test_a_finished_runs_report_json_has_one_cost_ledger_and_none_of_the_old_counters(tmp_path):
    """report.json ``cost``: the state's ledger (node, phase and device entries) with the report's own
    ``phase:startup`` and ``phase:report``, the run's ``wall``, its CPU seconds and ``analysis``; no
    gpu_seconds, device_seconds, node_seconds, phase_seconds, cpu_seconds, analysis_seconds or wall_seconds."""
    task = tmp_path / "task_initial.py"
    task.write_text("x = 1\n")
    state = {"task_path": str(task), "task_name": "t", "config": {"mode": "optimize"}, "best": {"id": "initial"},
             "cost": {"node:triage": 3.0, "node:profiler": 1.0, "node:verifier": 5.0, "phase:probe": 2.5,
                      "phase:analysis:triage": 0.5, "phase:analysis:profile": 1.0, "phase:verify": 4.0,
                      "phase:select": 1.0, "device:jobs": 6.0, "device:held": 1.5}}
    rep = write_outputs(tmp_path, state, wall=12.0, analysis_nodes=("triage", "profiler"))
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["cost"] == rep["cost"]
    cost = on_disk["cost"]
    for old in ("gpu_seconds", "device_seconds", "node_seconds", "phase_seconds", "cpu_seconds",
                "analysis_seconds", "wall_seconds"):
        assert old not in on_disk, old
    assert part(cost, NODE) == {"triage": 3.0, "profiler": 1.0, "verifier": 5.0}
    ph = part(cost, PHASE)
    assert ph["verify"] == 4.0 and ph["startup"] == 3.0 and ph["report"] >= 0.0
    assert phases.device(cost) == (6.0, 1.5) and phases.wall(cost) == 12.0 and phases.analysis(cost) == 4.0
    assert set(phases.cpu(cost)) == {"self", "children", "live"}
    assert all(isinstance(v, float) for v in cost.values()), cost   # flat: one number per key
    assert set(cost) == {k for k in cost if k.split(":")[0] in ("node", "phase", "device", "cpu")} | {
        phases.WALL, phases.ANALYSIS}
    html = (tmp_path / "report.html").read_text()
    assert "wall 12.0 s · device jobs 6.0 s" in html


def test_the_sampler_counts_shared_and_exclusive_holds(tmp_path):
    lock = tmp_path / "gpu.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)

    def hold():
        time.sleep(0.2)
        fcntl.flock(fd, fcntl.LOCK_SH)
        time.sleep(0.6)
        fcntl.flock(fd, fcntl.LOCK_UN)
        fcntl.flock(fd, fcntl.LOCK_EX)
        time.sleep(0.6)
        fcntl.flock(fd, fcntl.LOCK_UN)
        time.sleep(0.2)

    with HeldSampler([tmp_path], interval=0.02) as s:
        t = threading.Thread(target=hold)
        t.start()
        t.join()
    os.close(fd)
    h = s.summary()
    assert 0.9 < h["held_s"] < 1.5 and 0.4 < h["exclusive_s"] < 0.8, h
    assert 0.5 < h["held_fraction"] < 0.85


def test_round_benches_never_time_torch_baselines(monkeypatch):
    """torch eager / torch.compile are timed once per task, by the batch's baselines job; a round's bench
    and the profile tier's bench never ask for them."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify import timing
    jobs = []

    def fake(job, backend, timeout, memory_bytes=None, extra_env=None, **kw):
        jobs.append(job)
        from tritondx.tools.exec.sandbox import JobResult
        return JobResult(kind="error", returncode=1, seconds=0.0, message="x"), 0.0, 0.0

    monkeypatch.setattr(timing, "run_device_job", fake)
    be = get_backend("interpreter")
    monkeypatch.setattr(type(be), "can_time", property(lambda self: True))
    here = Path(__file__).resolve().parents[1] / "verifier" / "tiny_axpy.py"
    timing.time_round(str(here), {}, [{"id": "c1", "path": str(here)}], be, 3, 60)
    assert jobs and all(j["kind"] == "bench" and j["baselines"] is False for j in jobs)
