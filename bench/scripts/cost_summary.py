"""Device helper: the cost lines of a batch's results.json (issue 16): tasks done out of the suite's,
median wall per task (with and without the wait for the torch baselines job), device-held fraction, what
the baselines jobs cost and how much of it overlapped the runs, seconds per phase.

Usage: python3 bench/scripts/cost_summary.py RESULTS_JSON SUITE_DIR
(The results list holds only the tasks that ended: a batch stopped at its deadline has fewer.)"""

import json
import statistics
import sys
from pathlib import Path

from tritondx.tools.run import phases

d = json.load(open(sys.argv[1]))
suite = len([p for p in Path(sys.argv[2]).glob("*.py") if not p.name.startswith("_")])
rs = [r for r in d["results"] if r.get("status") == "done"]
walls = sorted(r["wall_s"] for r in rs)
held = d["meta"].get("device_held") or {}
print(f"tasks done {len(rs)} of {suite}" + (f"; median wall per task {statistics.median(walls):.0f} s; "
                                            f"max {max(walls):.0f} s" if walls else ""))
print(f"until the last finished task: wall {held.get('wall_s', 0):.0f} s; device held {held.get('held_s', 0):.0f} s "
      f"({held.get('held_fraction', 0):.0%}); exclusive {held.get('exclusive_s', 0):.0f} s")
host = d["meta"].get("host_cpu") or {}
# each task's CPU seconds: its cost ledger's cpu:* (tools/run/phases.py); results.json before the ledger: cpu_seconds
cpu = sorted(sum((phases.cpu(r["cost"]) if r.get("cost") is not None else r.get("cpu_seconds") or {}).values())
             for r in rs if phases.cpu(r.get("cost")) or r.get("cpu_seconds"))
if host:
    print(f"host CPU busy {host['busy_fraction']:.0%} of {host['cores']} cores ({host['busy_cpu_s']:.0f} CPU-s); "
          f"runs and their jobs {host['children_cpu_s']:.0f} CPU-s"
          + (f"; per finished task median {statistics.median(cpu):.0f} CPU-s, max {max(cpu):.0f}" if cpu else ""))
tm = [r["timing"] for r in rs if r.get("timing")]  # batches since the baselines job ran beside the runs
if tm:
    print(f"median wall per task without waiting for the baselines job "
          f"{statistics.median(t['wall_without_baselines_s'] for t in tm):.0f} s; baselines jobs "
          f"{sum(t['baselines_s'] for t in tm):.0f} s, of which overlapped with the runs "
          f"{sum(t['baselines_overlapped_s'] for t in tm):.0f} s, waited for "
          f"{sum(t['baselines_wait_s'] for t in tm):.0f} s "
          f"(per task max {max(t['baselines_wait_s'] for t in tm):.0f} s), after the tasks' ends with their workers "
          f"on the next tasks {sum(t.get('baselines_after_s', 0.0) for t in tm):.0f} s; final benches "
          f"{sum(t['final_bench_s'] for t in tm):.0f} s")
ratios = [r["initial_ms_ratio"] for r in rs if r.get("initial_ms_ratio")]
if ratios:
    print(f"initial kernel, final bench / baselines job: {min(ratios):.3f}..{max(ratios):.3f} over {len(ratios)} tasks")
ph = (phases.part(d["aggregate"]["cost"], phases.PHASE) if d["aggregate"].get("cost") is not None
      else dict(d["aggregate"].get("phase_seconds") or {}))   # results.json before the cost ledger
overlapped = ph.pop("baselines", None) if tm else None  # jobs of their own: not a share of the tasks' time
tot = sum(ph.values()) or 1
print("  ".join(f"{k} {v:.0f}s ({v / tot:.0%})" for k, v in sorted(ph.items(), key=lambda kv: -kv[1]))
      + (f"  [baselines {overlapped:.0f}s, jobs of their own: not in the shares]" if overlapped else ""))
# the round benches' own device figures (artifacts/bench_round*.json), over every run folder (finished or not)
runs = Path(sys.argv[1]).parent / "runs"
agg = {"jobs": 0, "wait_s": 0.0, "shared_s": 0.0, "exclusive_s": 0.0, "aside_s": 0.0}
for f in runs.glob("*/artifacts/bench_round*.json"):
    try:
        u = json.loads(f.read_text()).get("device_usage") or {}
    except (OSError, ValueError, AttributeError):
        continue
    agg["jobs"] += 1
    for k in ("wait_s", "shared_s", "exclusive_s", "aside_s"):
        agg[k] += float(u.get(k, 0.0))
if agg["jobs"]:
    print(f"round benches: {agg['jobs']} jobs; waited for the device {agg['wait_s']:.0f} s, held it shared "
          f"{agg['shared_s']:.0f} s and exclusive {agg['exclusive_s']:.0f} s; gave it back while compiling "
          f"{agg['aside_s']:.0f} s")
# the judge's steps per candidate (report.json candidates' verify_steps, judge.candidate.STEPS), summed over the finished runs,
# and the longest single full verification
steps: dict[str, float] = {}
longest = (0.0, "", {})
for f in runs.glob("*/report.json"):
    try:
        cands = json.loads(f.read_text()).get("candidates") or []
    except (OSError, ValueError, AttributeError):
        continue
    for c in cands:
        st = c.get("verify_steps") or {}
        for k, v in st.items():
            steps[k] = steps.get(k, 0.0) + float(v)
        if st and float(c.get("verify_seconds") or 0.0) > longest[0]:
            longest = (float(c["verify_seconds"]), f"{f.parent.name}:{c['id']}", st)
if steps:
    print("judge steps (all candidates): " + "  ".join(f"{k} {v:.0f}s" for k, v in
                                                      sorted(steps.items(), key=lambda kv: -kv[1])))
    print(f"longest verification {longest[0]:.0f} s ({longest[1]}): "
          + "  ".join(f"{k} {v:.1f}s" for k, v in sorted(longest[2].items(), key=lambda kv: -kv[1])))
# the profile tier's ncu sessions (artifacts/profile_round*.json "ncu_session": the profiler lock's hold and the launch
# job's steps after the go), over every run folder
sessions = []
for f in runs.glob("*/artifacts/profile_round*.json"):
    try:
        s = json.loads(f.read_text()).get("ncu_session")
    except (OSError, ValueError, AttributeError):
        continue
    if isinstance(s, dict):
        sessions.append(s)
if sessions:
    tot: dict[str, float] = {}
    for s in sessions:
        for k, v in (s.get("steps") or {}).items():
            tot[k] = tot.get(k, 0.0) + float(v)
    held = sorted(float(s.get("profiler_seconds") or 0.0) for s in sessions)
    print(f"profile tier ncu sessions: {len(sessions)}; profiler lock held {sum(held):.0f} s (median "
          f"{statistics.median(held):.1f} s, max {held[-1]:.1f} s); the launch jobs' steps: "
          + "  ".join(f"{k} {v:.0f}s" for k, v in sorted(tot.items(), key=lambda kv: -kv[1])))
# the hardware checks' ncu processes (a HardwareCheck's "ncu_seconds" per part, in every run's report.json; one check
# appears in several places of a report: counted once): the profiler lock's hold by part, and the prewarm runners
# that ran outside it (hwcheck._Prewarm)
parts: dict[str, dict] = {}


def _walk(x) -> None:
    if isinstance(x, dict):
        ncu_s = x.get("ncu_seconds")
        if isinstance(ncu_s, dict):
            for p in ncu_s.values():
                if isinstance(p, dict) and "lock_s" in p:
                    parts[json.dumps(p, sort_keys=True)] = p
        for v in x.values():
            _walk(v)
    elif isinstance(x, list):
        for v in x:
            _walk(v)


for f in runs.glob("*/report.json"):
    try:
        _walk(json.loads(f.read_text()))
    except (OSError, ValueError):
        continue
if parts:
    ps = list(parts.values())
    locks = sorted(float(p["lock_s"]) for p in ps)
    by = {k: sum(float(p.get(k) or 0.0) for p in ps) for k in ("hello_s", "warmup_s", "calls_s", "exit_s")}
    warm = [float(p["prewarm_s"]) for p in ps if "prewarm_s" in p]
    print(f"hardware-check ncu processes: {len(ps)}; profiler lock held {sum(locks):.0f} s (median "
          f"{statistics.median(locks):.1f} s, max {locks[-1]:.1f} s): "
          + "  ".join(f"{k} {v:.0f}s" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
          + (f"; prewarm runners {len(warm)}, {sum(warm):.0f} s outside the lock" if warm else ""))
