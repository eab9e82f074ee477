"""Start-up cost of the job sandbox: ``python -c pass`` under each mechanism, with the view a real job
gets (its scratch folder, the read-only binds of its interpreter and task folder).

    python bench/scripts/sandbox_overhead.py [N]   ->  one JSON line: median ms per mechanism
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tritondx.tools.exec import sandbox_fs
from tritondx.tools.exec.sandbox import _works


def _median_ms(cmd: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 1)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    scratch = Path(tempfile.mkdtemp(prefix="tritondx-job-bench-")).resolve()
    try:
        view = sandbox_fs.view_for(scratch, sandbox_fs.read_paths(sys.executable, {}, [str(scratch.parent)]), [],
                                   network=False)
        job = [sys.executable, "-c", "pass"]
        out = {"n": n, "plain_ms": _median_ms(job, n)}
        for mech in ("bwrap", "unshare"):
            if _works(mech):
                out[f"{mech}_ms"] = _median_ms(sandbox_fs.command(mech, view) + job, n)
                out[f"{mech}_overhead_ms"] = round(out[f"{mech}_ms"] - out["plain_ms"], 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out))
