"""Device helper: run_batch with the arguments the suite script passes (no CLI dependency).

Usage: python3 bench/scripts/run_batch.py SUITE OUT WORKERS DEADLINE_S [ONLY]
Environment: BATCH_EXTRA (extra `tritondx optimize` arguments, e.g. "--all-tiers"); BATCH_RAY (a Ray
address, e.g. "local": one Ray task per kernel task);
TRITONDX_FINAL_PROFILE defaults to 0 here (the batch's own final bench times every task; per-run
Nsight Compute counters of initial and best would add ~20 s of exclusive device time per task).
"""

import json
import os
import shlex
import sys

from tritondx.batch import run_batch

os.environ.setdefault("TRITONDX_FINAL_PROFILE", "0")
suite, out, workers, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
only = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else None
extra = shlex.split(os.environ.get("BATCH_EXTRA", ""))
agg = run_batch(suite, out, backend="cuda", workers=workers, deadline_s=deadline, shuffle=True, only=only,
                progress=False, extra_args=extra or None,
                ray_address=os.environ.get("BATCH_RAY") or None)
print(json.dumps(agg, indent=1, default=str))
