"""Where a run's time goes: wall seconds per phase (probe, analysis per tier, IR compile, verify,
bench, rewrite, report), summed over the run.

A node times the job-running parts it calls with ``Phases.time(name)``; whatever the node spends
outside them is its own phase (which one, the graph says: its ``timed`` wrapper), so the phases
of a node always add up to its wall time. ``startup`` (the CLI, the graph, the checkpointer) is the
run's wall time not spent in any node, filled in by the report.

A ``BACKGROUND`` phase is work that ran beside the run's other phases (the IR capture of the initial
kernel started ahead of the IR tier, ``tools/evidence/ahead.py``): its own seconds, start to end, are
reported, but they are no part of the node that reports them, nor do they add up to the run's wall time
with the rest (what a node waited for it is in that node's own phase, ``ir_compile``).
"""

from __future__ import annotations

import contextlib
import time

#: the order phases are shown in
ORDER = ("startup", "probe", "analysis:triage", "analysis:profile", "ir_compile", "ir_compile_ahead",
         "analysis:ir", "analysis:compiler", "rewrite", "verify", "bench", "hwcheck", "ncu", "select", "report")
#: phases that overlap the others (see the module's text): outside every node's wall time
BACKGROUND = frozenset({"ir_compile_ahead"})


class Phases:
    """Seconds per phase inside one node."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def time(self, name: str):
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + max(0.0, seconds), 3)


def with_node_rest(own: str, node_wall: float, timed: dict[str, float] | None) -> dict[str, float]:
    """``timed`` plus the node's remaining wall seconds under its own phase ``own`` (``BACKGROUND`` phases are
    no part of the node's wall time)."""
    out = dict(timed or {})
    rest = node_wall - sum(v for k, v in out.items() if k not in BACKGROUND)
    out[own] = round(out.get(own, 0.0) + max(0.0, rest), 3)
    return out


def ordered(seconds: dict[str, float]) -> list[tuple[str, float]]:
    """(phase, seconds) in ``ORDER``, unknown phases last."""
    known = [(k, seconds[k]) for k in ORDER if k in seconds]
    return known + sorted((k, v) for k, v in seconds.items() if k not in ORDER)


def table_md(seconds: dict[str, float], wall: float | None = None) -> list[str]:
    """A markdown table of the phases and their share of ``wall``."""
    if not seconds:
        return []
    total = wall or sum(seconds.values()) or 1.0
    lines = ["| phase | seconds | share |", "|---|---|---|"]
    lines += [f"| {k} | {v:.1f} | {v / total:.0%} |" for k, v in ordered(seconds)]
    return lines


# --- the run's cost ledger -------------------------------------------------------------------------------------
# One state key, ``cost`` (summed by its reducer), instead of four counters: ``node:<name>`` wall seconds of each
# node, ``phase:<name>`` wall seconds per phase (above), ``device:jobs`` wall seconds of the device jobs (verify,
# bench, tune, profile), ``device:held`` the seconds those jobs held the device.
NODE, PHASE, DEVICE_JOBS, DEVICE_HELD = "node:", "phase:", "device:jobs", "device:held"


def entries(phases: dict[str, float] | None = None, device_jobs: float = 0.0, device_held: float = 0.0
            ) -> dict[str, float]:
    """A node's entries for the ledger: its timed phases and the device seconds of the jobs it ran."""
    out = {PHASE + k: v for k, v in (phases or {}).items()}
    if device_jobs:
        out[DEVICE_JOBS] = round(device_jobs, 3)
    if device_held:
        out[DEVICE_HELD] = round(device_held, 3)
    return out


def with_node(name: str, own: str, wall: float, cost: dict[str, float] | None) -> dict[str, float]:
    """A node's entries plus its wall seconds and what it did not time itself under its own phase ``own``."""
    out = {k: v for k, v in (cost or {}).items() if not k.startswith(PHASE)}
    phases = with_node_rest(own, wall, {k[len(PHASE):]: v for k, v in (cost or {}).items() if k.startswith(PHASE)})
    out.update({PHASE + k: v for k, v in phases.items()})
    out[NODE + name] = round(wall, 3)
    return out


def part(cost: dict[str, float] | None, prefix: str) -> dict[str, float]:
    """The ledger's entries under ``prefix`` (``NODE`` or ``PHASE``), by name."""
    return {k[len(prefix):]: v for k, v in (cost or {}).items() if k.startswith(prefix)}


def device(cost: dict[str, float] | None) -> tuple[float, float]:
    """(wall seconds of the device jobs, seconds they held the device)."""
    return (cost or {}).get(DEVICE_JOBS, 0.0), (cost or {}).get(DEVICE_HELD, 0.0)


# --- the report's ledger: report.json ``cost``, and a batch's results.json (each task's and the aggregate's) -------
# The run's ledger (above) with ``phase:startup`` (the run's wall time outside every node) and ``phase:report`` (the
# writer's own seconds, added last), plus ``wall`` (the run's wall seconds), ``cpu:self`` / ``cpu:children`` /
# ``cpu:live`` (CPU seconds of the run's process, of the jobs it waited for, of its descendants still running:
# tools/run/host.py ``process_cpu_seconds``) and ``analysis`` (the wall seconds of the nodes that gather the tiers'
# evidence). A batch adds ``phase:final_bench`` and ``phase:baselines`` to a task's and sums the tasks' key by key.
WALL, CPU, ANALYSIS = "wall", "cpu:", "analysis"
STARTUP, REPORT = "startup", "report"


def report_ledger(cost: dict[str, float] | None, wall_s: float, cpu_s: dict[str, float] | None = None,
                  analysis_nodes: tuple[str, ...] | frozenset[str] = ()) -> dict[str, float]:
    """The report's ledger from the run's: ``startup`` is ``wall_s`` less every node's seconds (added to what came
    before the graph, the CLI's imports: runner.py); ``cpu_s`` the process's CPU seconds by kind (None: none read);
    ``analysis`` the seconds of the nodes ``analysis_nodes`` names."""
    nodes = part(cost, NODE)
    out = dict(cost or {})
    outside = wall_s - sum(nodes.values())
    if outside > 0:
        out[PHASE + STARTUP] = round(out.get(PHASE + STARTUP, 0.0) + outside, 3)
    out[WALL] = round(wall_s, 3)
    out.update({CPU + k: round(v, 3) for k, v in (cpu_s or {}).items()})
    out[ANALYSIS] = round(sum(v for k, v in nodes.items() if k in analysis_nodes), 3)
    return dict(sorted(out.items()))


def wall(cost: dict[str, float] | None) -> float:
    """The run's wall seconds (a batch's aggregate: the tasks' runs summed)."""
    return (cost or {}).get(WALL, 0.0)


def cpu(cost: dict[str, float] | None) -> dict[str, float]:
    """CPU seconds by kind (``self``, ``children``, ``live``); empty where none were read."""
    return part(cost, CPU)


def analysis(cost: dict[str, float] | None) -> float:
    """The wall seconds of the nodes that gather the tiers' evidence."""
    return (cost or {}).get(ANALYSIS, 0.0)


def summed(ledgers) -> dict[str, float]:
    """Ledgers summed key by key (a batch's aggregate)."""
    out: dict[str, float] = {}
    for led in ledgers:
        for k, v in (led or {}).items():
            out[k] = round(out.get(k, 0.0) + v, 3)
    return dict(sorted(out.items()))
