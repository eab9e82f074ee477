"""The report's "initial vs best" profile table and the final-profile switch."""

from __future__ import annotations

from tritondx.config import RunConfig
from tritondx.tools.evidence.ncu import NcuSession
from tritondx.tools.report.writer import _profile_md


def _report(final_profile):
    return {
        "best": {"id": "r1c2", "family": "fuse_passes"},
        "measurements": [
            {"id": "r1c2", "median_ms": 0.070, "spread": 0.012, "roofline_fraction": 0.91, "family": "fuse_passes"},
            {"id": "round1:initial", "median_ms": 0.1454, "spread": 0.02, "roofline_fraction": 0.44,
             "family": "initial"},
        ],
        "final_profile": final_profile,
    }


def test_table_has_time_spread_roofline_and_counters():
    fp = {"ncu": "ok", "kernels": {
        "initial": [{"kernel": "row_max_kernel", "dram_pct": 41.0, "sm_pct": 12.0, "achieved_occupancy_pct": 30.0,
                     "l2_hit_pct": 5.0, "top_stalls": [["long_scoreboard", 0.61]]},
                    {"kernel": "normalize_kernel", "dram_pct": 55.0, "sm_pct": 20.0, "achieved_occupancy_pct": 31.0,
                     "l2_hit_pct": 4.0, "top_stalls": []}],
        "best": [{"kernel": "softmax_kernel", "dram_pct": 88.0, "sm_pct": 35.0, "achieved_occupancy_pct": 60.0,
                  "l2_hit_pct": 2.0, "top_stalls": [["long_scoreboard", 0.7]]}]}}
    text = "\n".join(_profile_md(_report(fp)))
    assert "| initial | 145.4 | 2.0% | 44% | row_max_kernel | 41 | 12 | 30 | 5 | long_scoreboard 0.61 |" in text
    assert "|  |  |  |  | normalize_kernel | 55 |" in text
    assert "| best | 70.0 | 1.2% | 91% | softmax_kernel | 88 | 35 | 60 | 2 |" in text


def test_table_says_when_ncu_gave_nothing():
    text = "\n".join(_profile_md(_report({"ncu": "initial: ncu not available: no hardware counters", "kernels": {}})))
    assert "| initial | 145.4 |" in text and "ncu: initial: ncu not available" in text
    text = "\n".join(_profile_md(_report(None)))
    assert "no counters read in this run" in text


def test_final_profile_switch_from_the_environment(monkeypatch):
    assert RunConfig.from_env().final_profile is True
    monkeypatch.setenv("TRITONDX_FINAL_PROFILE", "0")
    assert RunConfig.from_env().final_profile is False


def test_final_profile_node_without_ncu_ends_the_run(tmp_path, monkeypatch):
    """The profiler's final mode (cuda runs): with no ncu on this machine it records why, ends the
    run (status done) and adds no findings."""
    from pathlib import Path
    from tritondx.agents import profiler
    monkeypatch.setattr(profiler, "profile_session",
                        lambda path, original=None: NcuSession(note="ncu not available: no hardware counters"))
    task = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"
    state = {"task_path": str(task), "run_dir": str(tmp_path), "best": {"id": "r1c1", "path": str(task), "measured": True}, "status": "final_profile"}
    cmd = profiler.profiler_node(state, {"configurable": {"thread_id": "t"}})
    assert cmd.goto == "report"
    assert cmd.update["status"] == "done" and "findings" not in cmd.update
    assert cmd.update["final_profile"]["ncu"].startswith("initial: ncu not available")


def test_counter_summary_keeps_the_first_launch_of_each_kernel():
    from tritondx.tools.evidence.ncu import counter_summary
    rows = [{"kernel": "k1", "dram_pct": 40.0, "stalls": {"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.2}},
            {"kernel": "k1", "dram_pct": 99.0, "stalls": {}},
            {"kernel": "k2", "dram_pct": 70.0, "stalls": {"a": 1.0}}]
    out = counter_summary(rows)
    assert [k["kernel"] for k in out] == ["k1", "k2"] and out[0]["dram_pct"] == 40.0
    assert out[0]["top_stalls"] == [["b", 0.5], ["c", 0.3], ["d", 0.2]]


def test_the_report_node_writes_the_run_files_from_the_state(tmp_path):
    """agents/report.py: the run's files come from the node every run ends through, from the state alone (a run
    started through the LangGraph API gets them too); outside a graph its wall time is the nodes' seconds; a
    state the probe never accepted writes nothing."""
    import json
    from pathlib import Path
    from tritondx.agents.report import report_node
    task = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"
    state = {"run_dir": str(tmp_path), "task_path": str(task), "best": {"id": "initial", "path": str(task)}, "cost": {"node:triage": 1.5, "node:verifier": 2.0},
             "status": "done", "decisions": [{"node": "triage"}, {"node": "verifier", "decision": "end"}]}
    assert report_node(state, {"configurable": {"thread_id": "t"}}) == {}
    assert not (tmp_path / "report.json").exists()   # no task_name: the probe never accepted the task
    assert report_node({**state, "task_name": "axpy"}, {"configurable": {"thread_id": "t"}}) == {}
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "done" and [d["node"] for d in report["decisions"]] == ["triage", "verifier"]
    assert report["cost"]["wall"] == 3.5
    assert (tmp_path / "optimized_task.py").read_text() == task.read_text()
