"""What the host's CPUs did while a run or a batch ran: the other half of "where the time goes" (the device lock's
sampler, ``gpulock.HeldSampler``, is the device's half).

- ``process_cpu_seconds``: CPU seconds (user + system) of this process and of every child it has waited for (the
  sandboxed jobs, their runners, compilers): a run's own CPU cost, read at the end of the run;
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
    """{"self": s, "children": s}: CPU seconds of this process and of its waited-for descendants so far."""
    try:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (OSError, AttributeError):
        return None
    return {"self": round(me.ru_utime + me.ru_stime, 2), "children": round(kids.ru_utime + kids.ru_stime, 2)}


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
        ours = (process_cpu_seconds() or {}).get("children", 0.0) - self._children0
        return {"wall_s": round(time.monotonic() - self._wall0, 2), "cores": cores,
                "busy_cpu_s": round(busy / hz, 1), "busy_fraction": round(busy / total, 4) if total else 0.0,
                "children_cpu_s": round(ours, 1)}


def host_cpu_line(h: dict[str, float]) -> str:
    """One line for a batch's summary."""
    return (f"host CPU busy {h['busy_fraction']:.0%} of {h['cores']} cores over {h['wall_s']:.0f} s "
            f"({h['busy_cpu_s']:.0f} CPU-s, all processes); the runs and every job they waited for: "
            f"{h['children_cpu_s']:.0f} CPU-s")
