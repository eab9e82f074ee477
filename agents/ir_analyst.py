"""IR analyst agent (tier 2): compile the current best kernel for the target, attribute IR to source."""

from __future__ import annotations

from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import backend_of, best_path, dump, logger, run_config, run_dir
from tritondx.config import RunConfig, RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Decision
from tritondx.tools.evidence.analysis import analyze_tier
from tritondx.tools.records.evidence import TIERS
from tritondx.tools.run.phases import Phases, entries


def compiler_follows(state: DXState, goto: str, cfg: RunConfig) -> bool:
    """Whether the compiler tier is expected to analyze the same kernel right after this tier: it comes
    next in the graph (diagnose, all tiers), or the backend cannot time kernels (the verifier then
    escalates after every round, the best staying what it was) and the round budget leaves a round
    after this tier's. Then this tier's capture also dumps every pass, for the compiler tier to reuse."""
    if cfg.stop_after_tier in TIERS and TIERS.index(cfg.stop_after_tier) < TIERS.index("compiler"):
        return False
    if goto == "compiler_expert":
        return True
    return not backend_of(state, cfg).can_time and state.get("round", 0) + 1 < cfg.max_rounds


def ir_analyst_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                    ) -> Command[Literal["rewriter", "compiler_expert"]]:
    log = logger("ir_analyst", config)
    cfg = run_config(runtime)
    goto = "compiler_expert" if cfg.mode == "diagnose" or cfg.all_tiers else "rewriter"
    ph = Phases()
    found, artifacts, note = analyze_tier("ir", best_path(state), state["target"], run_dir(state),
                                          state.get("round", 0), phases=ph, passes_ahead=compiler_follows(state, goto, cfg))
    for f in found:  # the version the evidence was read from
        f.subject = (state.get("best") or {}).get("id") or "initial"
    log.info("ir_analyzed", findings=len(found), target=state["target"], note=note)
    update = {"tiers_done": ["ir"], "findings": dump(found), "artifacts": artifacts, "cost": entries(ph.seconds)}
    if note:
        update["decisions"] = [Decision(node="ir_analyst", decision="capture note", reason=note).record()]
    return Command(goto=goto, update=update)
