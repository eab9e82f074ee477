"""What the host's CPUs did while a run or a batch ran: the other half of "where the time goes" (the device lock's
sampler, ``held_sampler.HeldSampler``, is the device's half).

- ``process_cpu_seconds``: CPU seconds (user + system) of this process, of every child it has waited for (the
  sandboxed jobs, their runners, compilers) and of its descendants still running: a run's own CPU cost, read at the
  end of the run;
- ``HostCpu``: the host's busy share over an interval from ``/proc/stat`` (all processes, not only ours): whether
  a batch's tasks were waiting for cores.

Linux; elsewhere both answer None.
"""

from __future__ import annotations

import os
import resource
import time

#: /proc/stat's first line, e.g. "cpu  2255 34 2290 22625563 6290 127 456 0 0 0": user nice system idle iowait irq
#: softirq steal guest guest_nice, in clock ticks; idle + iowait are not busy
PROC_STAT = "/proc/stat"


def process_cpu_seconds() -> dict[str, float] | None:
    """{"self": s, "children": s, "live": s}: CPU seconds of this process, of its waited-for descendants so far, and
    of its descendants still running (a judge server, a baselines job: ``live_descendants_cpu_seconds``)."""
    try:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (OSError, AttributeError):
        return None
    return {"self": round(me.ru_utime + me.ru_stime, 2), "children": round(kids.ru_utime + kids.ru_stime, 2),
            "live": round(live_descendants_cpu_seconds(), 2)}


#: /proc/PID/stat after the command's closing parenthesis, e.g. "S 1 1 1 0 -1 4194560 ... 7 3 0 0 ...": state ppid ...;
#: utime stime cutime cstime are the 12th-15th fields after it (clock ticks)
_STAT_AFTER_COMM = {"ppid": 1, "utime": 11, "stime": 12, "cutime": 13, "cstime": 14}


def _stat(pid: str) -> tuple[int, int] | None:
    """(ppid, CPU ticks of the process and of its waited-for children) of one /proc entry."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        ticks = sum(int(rest[_STAT_AFTER_COMM[k]]) for k in ("utime", "stime", "cutime", "cstime"))
        return int(rest[_STAT_AFTER_COMM["ppid"]]), ticks
    except (IndexError, ValueError):
        return None


def live_descendants_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of the processes under ``root`` (this process) that are still running, each with the children it
    has waited for (those are no longer running, so nothing counts twice). Processes in a job's PID namespace are in
    the host's /proc too. 0.0 where there is no /proc."""
    root = root or os.getpid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0.0
    info = {int(p): st for p in pids if (st := _stat(p)) is not None}
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in info.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0, list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        total += info[pid][1]
        todo += kids.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def _ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot."""
    try:
        with open(PROC_STAT) as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    vals = [int(x) for x in first[1:9]]   # guest time is already in user
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


class HostCpu:
    """The host's CPU use between ``start()`` and ``summary()``: busy CPU seconds, cores, and the busy share."""

    def __init__(self) -> None:
        self._t0: tuple[int, int] | None = None
        self._wall0 = 0.0
        self._children0 = 0.0

    def start(self) -> "HostCpu":
        self._t0 = _ticks()
        self._wall0 = time.monotonic()
        self._children0 = (process_cpu_seconds() or {}).get("children", 0.0)
        return self

    def summary(self) -> dict[str, float] | None:
        now = _ticks()
        if self._t0 is None or now is None:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        busy, total = now[0] - self._t0[0], now[1] - self._t0[1]
        cores = os.cpu_count() or 1
        now_cpu = process_cpu_seconds() or {}
        ours = now_cpu.get("children", 0.0) + now_cpu.get("live", 0.0) - self._children0
        return {"wall_s": round(time.monotonic() - self._wall0, 2), "cores": cores,
                "busy_cpu_s": round(busy / hz, 1), "busy_fraction": round(busy / total, 4) if total else 0.0,
                "children_cpu_s": round(ours, 1)}


def host_cpu_line(h: dict[str, float]) -> str:
    """One line for a batch's summary."""
    return (f"host CPU busy {h['busy_fraction']:.0%} of {h['cores']} cores over {h['wall_s']:.0f} s "
            f"({h['busy_cpu_s']:.0f} CPU-s, all processes); the runs and their jobs: "
            f"{h['children_cpu_s']:.0f} CPU-s")
