"""Compiler expert agent (tier 3): per-pass IR dumps, what each relevant pass did or failed to do."""

from __future__ import annotations

from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import best_path, dump, logger, run_config, run_dir
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Decision
from tritondx.tools.evidence.analysis import analyze_tier
from tritondx.tools.run.phases import Phases, entries


def compiler_expert_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                         ) -> Command[Literal["rewriter", "report"]]:
    log = logger("compiler_expert", config)
    cfg = run_config(runtime)
    goto = "report" if cfg.mode == "diagnose" else "rewriter"
    ph = Phases()
    found, artifacts, note = analyze_tier("compiler", best_path(state), state["target"], run_dir(state),
                                          state.get("round", 0), phases=ph)
    for f in found:  # the version the evidence was read from
        f.subject = (state.get("best") or {}).get("id") or "initial"
    log.info("passes_analyzed", findings=len(found), note=note)
    update = {"tiers_done": ["compiler"], "findings": dump(found), "artifacts": artifacts, "cost": entries(ph.seconds)}
    if cfg.mode == "diagnose":
        update["status"] = "diagnosed"
    if note:
        update["decisions"] = [Decision(node="compiler_expert", decision="capture note", reason=note).record()]
    return Command(goto=goto, update=update)
