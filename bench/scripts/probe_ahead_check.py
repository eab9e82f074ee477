"""Device: one autotuned task's probe with and without tune-ahead, each on a fresh trusted layer, then a bench job of
the initial kernel reading the tune-ahead layer (does it time the autotuner's configs again?). Prints a JSON line per
step. Usage: python3 bench/scripts/probe_ahead_check.py TASK"""

import json
import os
import sys
import tempfile
import time

task = os.path.abspath(sys.argv[1])
from tritondx.tools.backends.cuda.backend import CudaBackend  # noqa: E402
from tritondx.tools.exec import triton_cache  # noqa: E402
from tritondx.tools.task.probe_job import probe_task  # noqa: E402
from tritondx.tools.verify.timing import bench_variants  # noqa: E402

print(json.dumps({"trusted_cache": triton_cache.enabled()}), flush=True)
ahead_root = tempfile.mkdtemp()
for label, root, ahead in (("tune_ahead", ahead_root, "1"), ("plain", tempfile.mkdtemp(), "0")):
    os.environ["TRITONDX_CACHE"], os.environ["TRITONDX_TUNE_AHEAD"] = root, ahead
    t0 = time.monotonic()
    res = probe_task(task, CudaBackend())
    print(json.dumps({"probe": label, "wall_s": round(time.monotonic() - t0, 1),
                      "tuned_ahead": res.get("tuned_ahead"), "device_usage": res.get("device_usage")}), flush=True)
os.environ["TRITONDX_CACHE"] = ahead_root
t0 = time.monotonic()
result, error, seconds = bench_variants(task, [{"id": "initial", "path": task}], CudaBackend(), rounds=3)
print(json.dumps({"bench_reading_tune_ahead": round(time.monotonic() - t0, 1), "error": error,
                  "device_usage": (result or {}).get("device_usage"),
                  "median_ms": [e["variants"]["initial"]["median_ms"] for e in (result or {}).get("shapes", [])]}),
      flush=True)
