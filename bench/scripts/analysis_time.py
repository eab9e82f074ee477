"""CPU benchmark (not a test): wall time of IR capture plus analysis for each bundled example.

Usage: python bench/scripts/analysis_time.py OUT.json
Captures for cuda:90 twice per example (IR tier without pass dumps, compiler tier with them), as the
ir_analyst and compiler_expert agents do, and times capture + detectors.
"""

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from tritondx.tools.evidence.analysis import analyze_tier

out = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
       "python": platform.python_version(), "examples": {}}
import triton  # noqa: E402
out["triton"] = triton.__version__
for task in sorted(Path("examples").glob("*.py")):
    rec = {}
    for tier in ("ir", "compiler"):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.time()
            found, arts, note = analyze_tier(tier, str(task), "cuda:90", Path(d), 0)
            rec[tier] = {"seconds": round(time.time() - t0, 2), "findings": len(found), "note": note}
    out["examples"][task.stem] = rec
    print(task.stem, rec, flush=True)
out["load_average_after"] = open("/proc/loadavg").read().split()[0]
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
