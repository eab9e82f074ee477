"""Device helper: the cost lines of a batch's results.json (issue 16): tasks done out of the suite's,
median wall per task, device-held fraction, seconds per phase.

Usage: python3 bench/scripts/cost_summary.py RESULTS_JSON SUITE_DIR
(The results list holds only the tasks that ended: a batch stopped at its deadline has fewer.)"""

import json
import statistics
import sys
from pathlib import Path

d = json.load(open(sys.argv[1]))
suite = len([p for p in Path(sys.argv[2]).glob("*.py") if not p.name.startswith("_")])
rs = [r for r in d["results"] if r.get("status") == "done"]
walls = sorted(r["wall_s"] for r in rs)
held = d["meta"].get("device_held") or {}
print(f"tasks done {len(rs)} of {suite}" + (f"; median wall per task {statistics.median(walls):.0f} s; "
                                            f"max {max(walls):.0f} s" if walls else ""))
print(f"until the last finished task: wall {held.get('wall_s', 0):.0f} s; device held {held.get('held_s', 0):.0f} s "
      f"({held.get('held_fraction', 0):.0%}); exclusive {held.get('exclusive_s', 0):.0f} s")
ph = d["aggregate"].get("phase_seconds") or {}
tot = sum(ph.values()) or 1
print("  ".join(f"{k} {v:.0f}s ({v / tot:.0%})" for k, v in sorted(ph.items(), key=lambda kv: -kv[1])))
