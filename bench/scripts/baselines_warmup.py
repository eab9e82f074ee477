"""Device helper: where a baselines bench job's warm-up hold goes (torch eager and torch.compile beside the initial
kernel), one task at a time, nothing else on the device.

Usage: python3 bench/scripts/baselines_warmup.py OUT_JSON TASK...
Prints per task the job's wall and held seconds and the warm-up's steps (``bench._prepare_shape`` marks).
"""

import json
import sys
import time
from pathlib import Path

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.timing import bench_variants

out, tasks = sys.argv[1], sys.argv[2:]
backend = get_backend("cuda")
results = {}
for task in tasks:
    t0 = time.monotonic()
    r, err, seconds = bench_variants(task, [{"id": "initial", "path": task}], backend, baselines=True)
    marks = [s.get("warmup") for s in (r or {}).get("shapes", [])]
    results[Path(task).stem] = {"wall_s": round(time.monotonic() - t0, 2), "job_s": seconds,
                                "device_seconds": (r or {}).get("device_seconds"), "warmup": marks, "error": err}
    print(Path(task).stem, json.dumps(results[Path(task).stem]), flush=True)
Path(out).write_text(json.dumps(results, indent=1))
