"""Device helper: the profile tier's ncu session with and without the prewarm job (``ncu._prewarm``: an autotuned
task's first call runs in a plain launch job before the session, which starts from its Triton cache), per task:
counter rows, wall seconds, the profiler lock's hold, the prewarm's seconds and the launch job's steps (its first call
under the lock: ``call1_s``). One session at a time, the order alternated per task; the same counters are expected
both ways (the profiled call is the launcher's last, in its settled config).

Usage: python3 bench/scripts/ncu_prewarm_check.py OUT_JSON TASK.py [TASK.py ...]   (a task that does not autotune is
prewarmed here too: ``TRITONDX_NCU_PREWARM=1`` vs ``0``)"""

import json
import os
import sys
import time
from pathlib import Path

from tritondx.tools.evidence import ncu

out = []
for k, task in enumerate(sys.argv[2:]):
    for mode in (("1", "0") if k % 2 == 0 else ("0", "1")):
        os.environ[ncu.PREWARM_ENV] = mode
        t0 = time.monotonic()
        s = ncu.profile_session(task, timeout=300)
        entry = {"task": Path(task).name, "prewarm": mode == "1", "rows": len(s.rows),
                 "wall_s": round(time.monotonic() - t0, 2), "profiler_s": s.profiler_seconds,
                 "device_s": s.device_seconds, "steps": s.steps,
                 "durations_ns": sorted(r.get("duration_ns") or 0 for r in s.rows)[:6], "note": s.note[:200]}
        print(entry, flush=True)
        out.append(entry)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
