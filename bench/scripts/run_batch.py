"""Device helper: run_batch with the arguments the suite script passes (no CLI dependency).

Usage: python3 bench/scripts/run_batch.py SUITE OUT WORKERS DEADLINE_S [ONLY]
"""

import json
import sys

from tritondx.batch import run_batch

suite, out, workers, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
only = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else None
agg = run_batch(suite, out, backend="cuda", workers=workers, deadline_s=deadline, shuffle=True, only=only,
                progress=False)
print(json.dumps(agg, indent=1, default=str))
