"""CPU measurement: peak resident memory of the orchestrator process (not its sandboxed jobs) and the
size of the checkpoint database, for `tritondx optimize` on each bundled example (interpreter backend).

Usage: python bench/scripts/orchestrator_footprint.py OUT.json
"""

import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tritondx.tools.run.phases import wall


def vm_hwm_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


exe = shutil.which("tritondx") or str(Path(sys.executable).parent / "tritondx")
out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ"), "python": platform.python_version(), "examples": {}}
for task in sorted(Path("examples").glob("*.py")):
    run = Path(tempfile.mkdtemp()) / "run"
    p = subprocess.Popen([exe, "optimize", str(task), "--backend", "interpreter", "--out", str(run)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while p.poll() is None:
        peak = max(peak, vm_hwm_kib(p.pid) or 0)
        time.sleep(0.2)
    db = sum(f.stat().st_size for f in run.glob("checkpoints.sqlite*"))
    rep = json.loads((run / "report.json").read_text()) if (run / "report.json").exists() else {}
    out["examples"][task.stem] = {"exit": p.returncode, "orchestrator_peak_rss_mib": round(peak / 1024, 1),
                                  "checkpoint_db_bytes": db, "rounds": rep.get("rounds"),
                                  "tiers_used": rep.get("tiers_used"),
                                  "wall_s": wall(rep["cost"]) if rep.get("cost") else None}
    print(task.stem, out["examples"][task.stem], flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
