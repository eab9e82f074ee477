"""Device helper: time a task's initial kernel and candidate files side by side (one bench job).

Usage: python3 bench/scripts/bench_files.py TASK.py CANDIDATE.py [CANDIDATE.py ...] [--rounds N]
Prints one JSON line per shape: each variant's median us, spread and roofline fraction, and the
speedup over the initial kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.timing import bench_variants

ap = argparse.ArgumentParser()
ap.add_argument("task")
ap.add_argument("candidates", nargs="+")
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()
variants = [{"id": "initial", "path": args.task}] + [{"id": Path(c).stem, "path": c} for c in args.candidates]
result, error, seconds = bench_variants(args.task, variants, get_backend("cuda"), rounds=args.rounds)
if result is None:
    sys.exit(f"bench_files: {error}")
for e in result["shapes"]:
    base = e["variants"]["initial"]["median_ms"]
    print(json.dumps({"shape": e["shape"], "dtype": e["dtype"], **{
        vid: {"us": round(v["median_ms"] * 1e3, 1), "spread": v["spread"], "roofline": v["roofline_fraction"],
              "speedup": round(base / v["median_ms"], 3)} for vid, v in e["variants"].items()},
        "errors": e["errors"]}))
print(json.dumps({"job_seconds": round(seconds, 1), "device_seconds": result.get("device_seconds")}))
