"""Report node: the last step of every run. Writes ``optimized_task.py``, ``report.json``, ``report.md`` and
``report.html`` into the run folder from the state's plain records (``tools/report/writer.py``), after the
run's background IR capture (``tools/evidence/ahead.py``) has ended, with the detectors re-run on the best version
(``tools/evidence/recheck.py``: which findings the result fixed) and the rewrite catalog's families."""

from __future__ import annotations

import time
from pathlib import Path

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from tritondx.agents.common import TIER_NODE, logger, run_config
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.evidence import ahead
from tritondx.tools.evidence.recheck import recheck_best
from tritondx.tools.report.writer import write_outputs
from tritondx.tools.rewrite.expert import CATALOG
from tritondx.tools.run.phases import NODE, PHASE, part


def run_wall(state: DXState, runtime: Runtime[RunContext] | None) -> float:
    """This invocation's wall seconds, from the runtime context's clock; else the nodes' own seconds."""
    started = getattr(getattr(runtime, "context", None), "started_at", None)
    return time.time() - started if started else sum(part(state.get("cost"), NODE).values())


def settled(state: DXState) -> dict:
    """The state once the background IR capture has ended: its seconds go under its own phase where no node
    counted them (the IR tier compiled another source, or never ran)."""
    folder = Path(state["run_dir"])
    ahead.settle(folder)
    seconds = ahead.take_seconds(folder)
    ahead.forget(folder)
    if not seconds:
        return dict(state)
    cost = dict(state.get("cost") or {})
    cost[PHASE + ahead.PHASE] = round(cost.get(PHASE + ahead.PHASE, 0.0) + seconds, 3)
    return {**state, "cost": cost}


def rechecked(state: DXState, log) -> dict | None:
    """The findings each tier's detectors report on the best version, when it is not the initial kernel (the
    closure's "fixed"); None when there is nothing to re-run or it failed (a table without "fixed", not no report)."""
    best = state.get("best") or {}
    if best.get("id") in (None, "initial") or not best.get("path") or not Path(best["path"]).exists():
        return None
    try:
        return recheck_best(best["path"], [t for t in state.get("tiers_done", []) if t != "profile"],
                            state.get("target"), Path(state["run_dir"]))
    except Exception as exc:  # noqa: BLE001 (any failure of the re-run: the report is still written)
        log.warning("closure_recheck_failed", error=f"{type(exc).__name__}: {exc}")
        return None


def report_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                ) -> dict:
    """Writes the files; routes nowhere (its edge goes to the end) and changes no state."""
    if not state.get("run_dir") or not state.get("task_name"):   # the probe never accepted the task
        return {}
    log = logger("report", config)
    wall = run_wall(state, runtime)
    t0 = time.monotonic()
    recheck = rechecked(state, log)
    records = {**settled(state), "config": run_config(runtime).model_dump()}   # the report says how it ran
    report = write_outputs(Path(state["run_dir"]), records, wall, tuple(TIER_NODE.values()), recheck,
                           frozenset(CATALOG), recheck_seconds=time.monotonic() - t0)
    log.info("report_written", run_dir=state["run_dir"], best=(state.get("best") or {}).get("id"),
             speedup=report.get("speedup"))
    return {}
