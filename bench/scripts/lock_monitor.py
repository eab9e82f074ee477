"""Device helper: who holds the batch's device lock, for how long, and who waits (no product code involved).

Polls /proc/locks (every 20 ms) for the flock locks on ``LOCK_DIR/gpu.lock`` and ``profiler.lock`` and writes,
when stopped (SIGTERM/SIGINT) or after ``MAX_S``, a JSON summary: every hold interval (pid, mode, start, seconds,
the holder's job kind read from its command line and job file), and per kind the count, total, median and
longest hold, plus the seconds during which a timer (a blocked exclusive request) waited while shared holders ran.
A hold shorter than the polling interval may be missed; the figures are a sample, not an accounting.

Usage: python3 bench/scripts/lock_monitor.py LOCK_DIR OUT.json [MAX_S]
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

POLL_S = 0.02


def _inode(p: Path) -> int | None:
    try:
        return os.stat(p).st_ino
    except OSError:
        return None


def _kind(pid: int, cache: dict[int, str]) -> str:
    """The job kind of a holder: the worker's job file's ``kind`` field, else a name from its command line."""
    if pid in cache:
        return cache[pid]
    kind = "?"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        argv = [a.decode(errors="replace") for a in argv if a]
        if "tritondx.tools.exec.worker" in argv:
            rest = argv[argv.index("tritondx.tools.exec.worker") + 1:]
            job = rest[1] if rest[:1] == ["--serve"] and len(rest) > 1 else (rest[0] if rest else "")
            for root in ("", f"/proc/{pid}/root"):
                try:
                    kind = json.loads(Path(root + job).read_text()).get("kind", "worker")
                    kind = "judge server (verify)" if kind == "judge" else kind
                    break
                except (OSError, ValueError):
                    kind = "worker"
        else:
            kind = next((a.rsplit(".", 1)[-1] for a in argv if a.startswith("tritondx.")),
                        Path(argv[0]).name if argv else "?")
            if any("ncu" in Path(a).name for a in argv[:1]):
                kind = "ncu"
    except OSError:
        pass
    cache[pid] = kind
    return kind


def _locks(inodes: dict[int, str]) -> list[tuple[str, str, int, bool]]:
    """(file, mode, pid, blocked) for every flock on the watched files."""
    out = []
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        blocked = "->" in parts
        parts = [p for p in parts if p != "->"]
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            ino = int(parts[5].split(":")[-1])
            pid = int(parts[4])
        except ValueError:
            continue
        if ino in inodes:
            out.append((inodes[ino], parts[3], pid, blocked))
    return out


def main() -> int:
    lock_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    max_s = float(sys.argv[3]) if len(sys.argv) > 3 else 3600.0
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    t0 = time.time()
    open_holds: dict[tuple, float] = {}
    holds: list[dict] = []
    kinds: dict[int, str] = {}
    timer_waits_behind_shared = 0.0
    samples = 0
    last = time.time()
    while not stop["now"] and time.time() - t0 < max_s:
        inodes = {i: n for n, i in ((n, _inode(lock_dir / f"{n}.lock")) for n in ("gpu", "profiler")) if i}
        now = time.time()
        dt, last = now - last, now
        cur = _locks(inodes)
        held = {(f, m, p) for f, m, p, b in cur if not b}
        for key in held - set(open_holds):
            open_holds[key] = now
            _kind(key[2], kinds)
        for key in set(open_holds) - held:
            start = open_holds.pop(key)
            holds.append({"file": key[0], "mode": key[1], "pid": key[2], "kind": kinds.get(key[2], "?"),
                          "start_s": round(start - t0, 3), "seconds": round(now - start, 3)})
        if any(f == "gpu" and b and m == "WRITE" for f, m, p, b in cur) and any(
                f == "gpu" and m == "READ" for f, m, p in held):
            timer_waits_behind_shared += dt
        samples += 1
        time.sleep(POLL_S)
    now = time.time()
    for key, start in open_holds.items():
        holds.append({"file": key[0], "mode": key[1], "pid": key[2], "kind": kinds.get(key[2], "?"),
                      "start_s": round(start - t0, 3), "seconds": round(now - start, 3), "open": True})
    by: dict[str, list[float]] = {}
    for h in holds:
        by.setdefault(f"{h['file']}:{h['mode']}:{h['kind']}", []).append(h["seconds"])
    summary = {k: {"holds": len(v), "total_s": round(sum(v), 1), "median_s": round(statistics.median(v), 2),
                   "max_s": round(max(v), 1), "over_5s": sum(1 for x in v if x > 5)}
               for k, v in sorted(by.items(), key=lambda kv: -sum(kv[1]))}
    out.write_text(json.dumps({"wall_s": round(now - t0, 1), "samples": samples, "poll_s": POLL_S,
                               "timer_waiting_while_shared_held_s": round(timer_waits_behind_shared, 1),
                               "by_kind": summary, "holds": holds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
