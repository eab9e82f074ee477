"""Device experiment: N hardware checks at once under one lock folder, the profiler lock held around the
profiled calls only (TRITONDX_JOB_NCU_LOCK=range) or for each runner's whole life (=process). Counts the
checks that failed ("a driver resource was unavailable" when two ncu collections overlap) and each one's wall.
At 49f30d8 the hardware check read TRITONDX_JOB_NCU_LOCK; range failed 3 of 4 checks on the H200
(bench/results/cost_h200_20261202), so the lock is held for each ncu runner's whole life again and the
variable is read no more: run now, the script measures N checks queued on that lock.
Usage: python3 bench/scripts/ncu_overlap.py MODE N TASK CANDIDATE OUT.json   (TRITONDX_LOCK_DIR set)"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tritondx.tools.backends.base import get_backend
from tritondx.tools.verify.timing import hardware_check

mode, n, task, cand, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
os.environ["TRITONDX_JOB_NCU_LOCK"] = mode
backend = get_backend("cuda")


def one(i: int) -> dict:
    t0 = time.monotonic()
    hw = hardware_check(task, cand, 1.0, backend)
    return {"i": i, "wall_s": round(time.monotonic() - t0, 2), "measured": hw.measured, "note": hw.note[:300]}


t0 = time.monotonic()
with ThreadPoolExecutor(n) as ex:
    rows = list(ex.map(one, range(n)))
failed = [r for r in rows if r["measured"] is None]
text = json.dumps({"mode": mode, "checks": n, "failed": len(failed), "wall_s": round(time.monotonic() - t0, 2),
                   "rows": rows}, indent=1)
open(out, "w").write(text)
print(text)
