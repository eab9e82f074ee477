"""bench/scripts/compare_modes.py: only tasks measured in both batches count; the bar is computed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _mod():
    spec = importlib.util.spec_from_file_location("compare_modes", ROOT / "bench/scripts/compare_modes.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _r(task, sp, an, dev, tiers=("triage",)):
    return {"task": task, "speedup": sp, "analysis_seconds": an, "gpu_seconds": dev, "tiers_used": list(tiers)}


def test_compare_counts_common_tasks_and_judges_the_bar():
    m = _mod()
    esc = {"results": [_r("a", 2.0, 5, 20), _r("b", 1.0, 5, 20), _r("only_esc", 9.0, 1, 1)]}
    full = {"results": [_r("a", 2.0, 30, 50), _r("b", 1.05, 30, 50), {"task": "c", "speedup": None}]}
    tot, lines = m.compare(esc, full)
    assert tot["tasks"] == 2
    assert abs(tot["escalation_geomean"] - 2 ** 0.5) < 1e-9
    assert abs(tot["speedup_kept"] - (2 ** 0.5) / (2.1 ** 0.5)) < 1e-9
    assert abs(tot["cost_ratio"] - 50 / 160) < 1e-9
    assert any("met)" in ln and "not met" not in ln for ln in lines)
    esc["results"][1]["speedup"] = 0.5  # now escalation keeps too little
    tot, lines = m.compare(esc, full)
    assert tot["speedup_kept"] < 0.95 and any("not met" in ln for ln in lines)


def _new(task, sp, an, held, jobs=99.0):
    """An entry of a results.json with the cost ledger (tools/run/phases.py)."""
    return {"task": task, "speedup": sp, "tiers_used": ["triage"],
            "cost": {"analysis": an, "device:held": held, "device:jobs": jobs, "phase:verify": 1.0}}


def test_compare_reads_the_cost_ledger_and_old_results_alike():
    m = _mod()
    esc = {"results": [_new("a", 2.0, 5, 20), _new("b", 1.0, 5, 20)]}
    full = {"results": [_new("a", 2.0, 30, 50), _new("b", 1.05, 30, 50)]}
    tot, _ = m.compare(esc, full)
    # analysis + device held seconds (never the jobs' wall seconds, device:jobs)
    assert tot["escalation_analysis_s"] == 10 and tot["all_tiers_device_s"] == 100
    assert abs(tot["cost_ratio"] - 50 / 160) < 1e-9 and tot["device_measure"] == "device:held"
    # a results.json before the ledger: device_seconds, else gpu_seconds (job wall seconds)
    old = {"results": [{**_r("a", 2.0, 5, 7), "device_seconds": 3.0}, {**_r("b", 1.0, 5, 7), "device_seconds": 3.0}]}
    tot, _ = m.compare(old, full)
    assert tot["escalation_device_s"] == 6.0 and tot["escalation_analysis_s"] == 10
    assert tot["device_measure"] == "device:held"
    tot, _ = m.compare({"results": [_r("a", 2.0, 5, 7)]}, full)
    assert tot["escalation_device_s"] == 7 and tot["device_measure"] == "gpu_seconds (job wall seconds)"
