"""Optimize every bundled example on the local GPU; collect the reports into one JSON file.

Usage (device): python3 bench/scripts/run_examples.py OUT_DIR [TASK ...]
The examples run at once (EXAMPLES_PARALLEL, default 3); the device lock (TRITONDX_LOCK_DIR) gives
each run's timing the GPU alone.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

out = Path(sys.argv[1])
tasks = sys.argv[2:] or sorted(str(p) for p in Path("examples").glob("*.py"))
os.environ.setdefault("TRITONDX_LOCK_DIR", str(out / ".locks"))


def one(task: str) -> dict:
    run = out / "runs" / Path(task).stem
    shutil.rmtree(run, ignore_errors=True)  # a fresh run each time (--out refuses a folder holding one)
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "tritondx.cli", "optimize", task, "--backend", "cuda",
                        "--out", str(run), "--baselines"], capture_output=True, text=True)
    wall = time.time() - t0
    entry = {"task": task, "exit": p.returncode, "wall_s": wall, "stderr_tail": p.stderr[-1500:]}
    rep = run / "report.json"
    if rep.exists():
        r = json.loads(rep.read_text())
        entry.update({k: r.get(k) for k in ("task", "kernel_class", "speedup", "speed", "tiers_used", "rounds",
                                            "cost", "best", "checkpoint_db_bytes",
                                            "final_profile")})
        entry["candidates"] = [{k: c.get(k) for k in ("id", "tier", "family", "verified", "rejection", "reason",
                                                       "measurement")} for c in r["candidates"]]
        entry["decisions"] = r["decisions"]
    print(f"{task}: exit={p.returncode} speedup={entry.get('speedup')} wall={wall:.0f}s", flush=True)
    return entry


from concurrent.futures import ThreadPoolExecutor  # noqa: E402

with ThreadPoolExecutor(max_workers=int(os.environ.get("EXAMPLES_PARALLEL", "3"))) as pool:
    results = list(pool.map(one, tasks))
import torch, triton  # noqa: E402
meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
(out / "examples.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str))
