"""Device experiment: N hardware checks at once under one lock folder, each ncu runner preloaded (its Python,
torch and Triton start outside the profiler lock, the lock from its hello to its end: MODE=preload) or holding
the lock for its whole life (MODE=whole, TRITONDX_JOB_NCU_PRELOAD=0). Prints, per check, its wall, whether it
measured, and per kernel the runner's seconds outside the lock, waiting for it and holding it (the lock-held
seconds are what a batch's checks queue on), and whether a runner lost the counters to another session and was
measured again ("retried_whole_life_lock"). Session 9 (49f30d8) ran an older form with the lock around the
profiled calls only: 3 of 4 checks failed (bench/results/cost_h200_20261202).
Usage: python3 bench/scripts/ncu_overlap.py MODE N TASK CANDIDATE OUT.json   (TRITONDX_LOCK_DIR set)"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.timing import hardware_check

mode, n, task, cand, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
if mode not in ("preload", "whole"):
    sys.exit(f"ncu_overlap.py: MODE must be preload or whole, not {mode!r}")
os.environ["TRITONDX_JOB_NCU_PRELOAD"] = "1" if mode == "preload" else "0"
backend = get_backend("cuda")


def one(i: int) -> dict:
    t0 = time.monotonic()
    hw = hardware_check(task, cand, 1.0, backend)
    return {"i": i, "wall_s": round(time.monotonic() - t0, 2), "measured": hw.measured, "note": hw.note[:300],
            "ncu_seconds": hw.ncu_seconds}


t0 = time.monotonic()
with ThreadPoolExecutor(n) as ex:
    rows = list(ex.map(one, range(n)))
failed = [r for r in rows if r["measured"] is None]
parts = [p for r in rows for p in r["ncu_seconds"].values()]
text = json.dumps({"mode": mode, "checks": n, "failed": len(failed), "wall_s": round(time.monotonic() - t0, 2),
                   "lock_held_s": round(sum(p.get("lock_s", 0.0) for p in parts), 2),
                   "outside_lock_s": round(sum(p.get("start_s", 0.0) for p in parts), 2),
                   "preloaded_parts": sum(bool(p.get("preloaded")) for p in parts), "parts": len(parts),
                   "rows": rows}, indent=1)
open(out, "w").write(text)
print(text)
