"""Device helper: the tune job alone (no graph) on some tasks, several at once on one GPU (one lock folder).

Usage: python3 bench/scripts/tune_smoke.py OUT_JSON BUDGET_S WORKERS TASK...
Prints one line per task: launches, configurations tried, the best screen ratio, the winners.
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.tune.run import tune_task

out, budget, workers, tasks = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
backend = get_backend("cuda")
results = {}


def one(task):
    t0 = time.monotonic()
    r = tune_task(task, Path("/tmp/tune_smoke") / Path(task).stem, backend, budget_s=budget)
    wall = time.monotonic() - t0
    best = max((w.speedup for w in r.winners), default=None)
    init = r.final.get("initial", {}).get("median_ms")
    line = (f"{Path(task).stem}: {wall:.0f}s launches={[(l['kernel'], l['grid'], round(l['share'], 2)) for l in r.launches][:3]} "
            f"trials={r.counts()} init_ms={init} best={best and round(best, 2)} "
            f"winners={[w.label for w in r.winners]} err={r.error[:200]}")
    print(line, flush=True)
    results[Path(task).stem] = {**r.model_dump(exclude={"winners"}), "wall_s": wall,
                                "winners": [w.model_dump(exclude={"source"}) for w in r.winners]}


with ThreadPoolExecutor(workers) as ex:
    list(ex.map(one, tasks))
Path(out).write_text(json.dumps(results, indent=1, default=str))
