"""Escalation on need vs every tier on every task: speedup reached and what each spent.

Usage: python3 bench/scripts/compare_modes.py ESCALATION/results.json ALL_TIERS/results.json [OUT.md]
Both batches must come from the same suite on the same device (run_suite.sh, the second with
BATCH_EXTRA=--all-tiers). Only tasks measured in both are compared. Prints (and writes) a markdown
table per task and the totals: geomean speedup of each mode, the share of the all-tiers speedup that
escalation keeps, and analysis seconds (triage + profiler + IR + compiler nodes) and device-job seconds
each spent. The issue's bar: escalation keeps >= 95% of the all-tiers speedup at <= 50% of its cost.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tritondx.tools.run import phases


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _held_s(r: dict) -> float | None:
    """Seconds the task's jobs held the device: its cost ledger's ``device:held`` (tools/run/phases.py); older
    results.json files had no ledger but ``device_seconds`` (None: neither, batches before 2026-11-30)."""
    if r.get("cost") is not None:
        return phases.device(r["cost"])[1]
    return r.get("device_seconds")


def _device_s(r: dict) -> float:
    """Seconds the task's jobs held the device (``_held_s``); batches before 2026-11-30 recorded only the jobs'
    wall seconds (``gpu_seconds``), which include start-up and waits for the device."""
    held = _held_s(r)
    return held if held is not None else (r.get("gpu_seconds") or 0)


def _analysis_s(r: dict) -> float:
    """The wall seconds of the task's analysis nodes: its ledger's ``analysis``, else (older files)
    ``analysis_seconds``."""
    return phases.analysis(r["cost"]) if r.get("cost") is not None else (r.get("analysis_seconds") or 0)


def compare(esc: dict, full: dict) -> tuple[dict, list[str]]:
    e = {r["task"]: r for r in esc["results"] if r.get("speedup")}
    a = {r["task"]: r for r in full["results"] if r.get("speedup")}
    common = sorted(set(e) & set(a))
    lines = ["| task | escalation speedup | all-tiers speedup | escalation tiers | esc. analysis s | all analysis s | "
             "esc. device s | all device s |", "|" + "---|" * 8]
    for t in common:
        x, y = e[t], a[t]
        lines.append(f"| {t} | {x['speedup']:.2f}x | {y['speedup']:.2f}x | {','.join(x.get('tiers_used', []))} | "
                     f"{_analysis_s(x):.0f} | {_analysis_s(y):.0f} | "
                     f"{_device_s(x):.0f} | {_device_s(y):.0f} |")
    tot = {"tasks": len(common),
           "escalation_geomean": _geo([e[t]["speedup"] for t in common]),
           "all_tiers_geomean": _geo([a[t]["speedup"] for t in common]),
           "escalation_analysis_s": sum(_analysis_s(e[t]) for t in common),
           "all_tiers_analysis_s": sum(_analysis_s(a[t]) for t in common),
           "escalation_device_s": sum(_device_s(e[t]) for t in common),
           "all_tiers_device_s": sum(_device_s(a[t]) for t in common),
           "device_measure": "device:held" if all(_held_s(r) is not None
                                                     for r in [*(e[t] for t in common), *(a[t] for t in common)])
           else "gpu_seconds (job wall seconds)"}
    if common:
        tot["speedup_kept"] = tot["escalation_geomean"] / tot["all_tiers_geomean"]
        cost_e = tot["escalation_analysis_s"] + tot["escalation_device_s"]
        cost_a = tot["all_tiers_analysis_s"] + tot["all_tiers_device_s"]
        tot["cost_ratio"] = cost_e / cost_a if cost_a else float("nan")
        lines += ["", f"- tasks compared: {len(common)}",
                  f"- geomean speedup: escalation {tot['escalation_geomean']:.2f}x, all tiers "
                  f"{tot['all_tiers_geomean']:.2f}x (escalation keeps {tot['speedup_kept']:.0%})",
                  f"- analysis seconds: escalation {tot['escalation_analysis_s']:.0f}, all tiers "
                  f"{tot['all_tiers_analysis_s']:.0f}; device seconds ({tot['device_measure']}): escalation "
                  f"{tot['escalation_device_s']:.0f}, all tiers {tot['all_tiers_device_s']:.0f}",
                  f"- escalation's cost (analysis + device seconds) is {tot['cost_ratio']:.0%} of all tiers' "
                  f"(bar: >= 95% of the speedup at <= 50% of the cost: "
                  f"{'met' if tot['speedup_kept'] >= 0.95 and tot['cost_ratio'] <= 0.5 else 'not met'})"]
    # a task only one mode finished is left out of the figures above: say which, and how far the other got, so
    # that a mode slower on some task never looks cheaper for it
    only = {"escalation": sorted(set(e) - set(a)), "all tiers": sorted(set(a) - set(e))}
    walls = {"escalation": {r["task"]: r for r in esc["results"]}, "all tiers": {r["task"]: r for r in full["results"]}}
    tot["finished_by_one_mode_only"] = only
    for mode, tasks in only.items():
        other = "all tiers" if mode == "escalation" else "escalation"
        for t in tasks:
            o = walls[other].get(t) or {}
            lines.append(f"- not compared: {t}, measured by {mode} only ({walls[mode][t].get('wall_s', 0):.0f} s); "
                         f"{other}: {o.get('status', 'not started')} after {o.get('wall_s', 0):.0f} s")
    return tot, lines


if __name__ == "__main__":
    esc, full = (json.loads(Path(p).read_text()) for p in sys.argv[1:3])
    tot, lines = compare(esc, full)
    text = "# Escalation on need vs all tiers\n\n" + "\n".join(lines) + "\n"
    print(text)
    if len(sys.argv) > 3:
        Path(sys.argv[3]).write_text(text)
        Path(sys.argv[3]).with_suffix(".json").write_text(json.dumps(tot, indent=1))
