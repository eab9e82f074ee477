"""Device helper: where one full verification spends its time (cProfile of the trusted judge, in process).

Usage: python3 bench/scripts/profile_verify.py OUT.json TASK.py [TASK.py ...]
Each task's own original is the candidate (the judge's full plan: listed shapes, derived sizes, value
stress, the benchmark shapes with one seed per dtype). Per task: wall seconds, seconds the judge waited
on the runner's answers (the candidate's process: its calls, transfers and compiles), and the 25 functions
with the most cumulative and own time. Measures the judge's code paths, not a candidate's speed.
"""

import cProfile
import io
import json
import os
import pstats
import sys
import time

from tritondx.tools.verify.judge.job import verify_round


def _top(stats: pstats.Stats, key: str, n: int = 25) -> list[dict]:
    stats.sort_stats(key)
    rows = []
    for (path, line, fn), (cc, nc, tt, ct, _) in sorted(stats.stats.items(), key=lambda kv: -kv[1][3 if key == "cumulative" else 2])[:n]:
        rows.append({"fn": f"{os.path.basename(path)}:{line}({fn})", "calls": nc, "own_s": round(tt, 3), "cum_s": round(ct, 3)})
    return rows


def main() -> int:
    out, tasks = sys.argv[1], sys.argv[2:]
    device = "cuda" if os.environ.get("PROFILE_DEVICE", "cuda") == "cuda" else "cpu"
    results = []
    for task in tasks:
        task = os.path.abspath(task)
        job = {"kind": "verify", "task": task, "device": device, "include_bench": device == "cuda",
               "allowed_ops": [], "candidates": [{"id": "orig", "path": task}], "timeout_per_candidate": 600,
               "parallel": 1, "scope": "full"}
        pr = cProfile.Profile()
        t0 = time.monotonic()
        pr.enable()
        r = verify_round(job, "0" * 64)
        pr.disable()
        wall = time.monotonic() - t0
        st = pstats.Stats(pr, stream=io.StringIO())
        waited = sum(ct for (path, _, fn), (_, _, _, ct, _) in st.stats.items()
                     if fn == "_read_frame" and path.endswith("wire.py"))
        v = r["verdicts"]["orig"]
        results.append({"task": os.path.basename(task), "wall_s": round(wall, 2), "waited_on_runner_s": round(waited, 2),
                        "passed": v.get("passed"), "class": v.get("class"), "checks": len(v.get("checks") or []),
                        "cum": _top(st, "cumulative"), "own": _top(st, "tottime")})
        print(json.dumps({k: results[-1][k] for k in ("task", "wall_s", "waited_on_runner_s", "passed", "checks")}), flush=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
