"""Device helper: the profile tier's ncu session with the gate (``ncu.profile_counters``: the launch job loads before
the profiler lock is taken) against the way it ran before (the lock held from ncu's start), per task: counter rows,
wall seconds, and seconds the profiler lock was held. One session at a time, alternating the order per task.

Usage: python3 bench/scripts/ncu_gate_check.py OUT_JSON TASK.py [TASK.py ...]"""

import contextlib
import json
import sys
import time
from pathlib import Path

from tritondx.tools.evidence import ncu

held: list[float] = []
_real = ncu.profiler


@contextlib.contextmanager
def _timed(*a, **kw):
    with _real(*a, **kw):
        t0 = time.monotonic()
        try:
            yield
        finally:
            held.append(time.monotonic() - t0)


ncu.profiler = _timed
exe = ncu.ncu_path()
out = []
for k, task in enumerate(sys.argv[2:]):
    for gated in ((True, False) if k % 2 == 0 else (False, True)):
        held.clear()
        t0 = time.monotonic()
        rows, o, e, past = ncu._ncu_launch(exe, task, 300, 6, gated=gated)
        entry = {"task": Path(task).name, "gated": gated, "rows": len(rows), "wall_s": round(time.monotonic() - t0, 2),
                 "lock_held_s": round(sum(held), 2), "past_gate": past,
                 "tail": "" if rows else " | ".join((e or o or "").strip().splitlines()[-2:])[:300]}
        print(entry, flush=True)
        out.append(entry)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
