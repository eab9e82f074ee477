"""Select node: the round's outcome and where the run goes next, from the verifier's and the bench's evidence.
Without a timing backend it also says which verified candidate is kept (``tools/verify/select_untimed.py``:
nothing is claimed faster). Routing is one function, ``tools/verify/route.py``'s ``decide``: stop, rewrite again
at the same tier, or escalate; then the run's own limits (a finding no family was tried on, the wall budget, a new
kernel that the tuner has not searched yet, the final profile, a person's approval)."""

from __future__ import annotations

import time
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import TIER_NODE, backend_of, logger, next_tier, run_config
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Decision
from tritondx.tools.report.closure import untried_suggestions
from tritondx.tools.rewrite.expert import CATALOG
from tritondx.tools.run.phases import NODE, device, part
from tritondx.tools.verify.route import Limits, RoundFacts, decide
from tritondx.tools.verify.select_untimed import unmeasured_choice

Next = Literal["tuner", "rewriter", "profiler", "ir_analyst", "compiler_expert", "final_approval", "report"]


def untried_route(findings: list[dict[str, Any]], candidates: list[dict[str, Any]], attempts: list[dict[str, Any]],
                  insufficient: list[str]) -> tuple[list[str], str] | None:
    """When the run would end because no tier is left: the catalog's families to try in one more round
    (suggested by findings that are still open, never tried), and the reason, or None."""
    left = untried_suggestions(findings, candidates, attempts, set(CATALOG), set(insufficient))
    if not left:
        return None
    fams = sorted({fam for v in left.values() for fam in v})
    return fams, (f"untried suggestions: {', '.join(fams)} (suggested by {len(left)} finding(s) still open): "
                  "one more round tries them first")


#: seconds a further round needs before the run's end at the latest (a rewrite, its checks and its bench: 40-90 s
#: each on the H100 corpus batches of 2026-12-05)
ROUND_RESERVE_S = 60.0


def deadline_route(finish_by: float | None, goto: str, reason: str, now: float) -> tuple[str, str]:
    """The route once a batch's deadline (``finish_by``) leaves no time for another round: the run ends with what
    it has verified (its final bench and report still to come) instead of being stopped mid-round."""
    if finish_by is None or goto == "__end__" or finish_by - now >= ROUND_RESERVE_S:
        return goto, reason
    return "__end__", f"the batch's deadline is {max(0.0, finish_by - now):.0f} s away, too close for a round; {reason}"


def select_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                ) -> Command[Next]:
    log = logger("select", config)
    cfg = run_config(runtime)
    backend = backend_of(state, cfg)
    cands = {c["id"]: c for c in state.get("candidates", [])}
    result = state.get("round_result") or {}
    checked, passed, gain = result.get("checked", []), result.get("passed", []), result.get("gain")
    round_no = state.get("round", 0)
    best = dict(state.get("best") or {})
    upd: dict = {}
    if passed and not backend.can_time:   # nothing is claimed faster; what is kept, and why
        best = upd["best"] = unmeasured_choice([cands[i] for i in passed], best, cfg.interactive,
                                               cfg.accept_unmeasured)
    tier_next = next_tier(state, cfg)
    outcome, reason = decide(
        RoundFacts(pending=bool(checked), passed=bool(passed), can_time=backend.can_time, gain=gain,
                   roofline_fraction=best.get("roofline_fraction"), rounds=round_no,
                   rounds_at_tier=state.get("rounds_at_tier", 0), device_seconds=device(state.get("cost"))[0],
                   has_next_tier=tier_next is not None, feedback_pending=bool(state.get("human_feedback"))),
        Limits(target_fraction=cfg.target_fraction, max_rounds=cfg.max_rounds, gpu_budget_s=cfg.gpu_budget_s,
               min_gain=cfg.min_gain, max_rounds_per_tier=cfg.max_rounds_per_tier))
    goto = {"stop": "__end__", "same_tier": "rewriter", "extra_round": "rewriter"}.get(outcome) or TIER_NODE[tier_next]
    if outcome == "next_tier":
        reason = f"escalate to {tier_next}: {reason}"
    if goto == "__end__" and reason == "no tier left":   # every finding closed: try what was never tried
        forced = untried_route(state.get("findings", []), list(cands.values()), state.get("family_attempts", []),
                               list(state.get("insufficient", [])))
        if forced:
            goto, reason, upd["force_families"] = "rewriter", forced[1], forced[0]
    spent = sum(part(state.get("cost"), NODE).values())
    if cfg.wall_budget_s and goto != "__end__" and spent >= cfg.wall_budget_s:
        goto, reason = "__end__", f"wall budget spent ({spent:.0f} s of {cfg.wall_budget_s:.0f} s); {reason}"
    goto, reason = deadline_route(cfg.finish_by, goto, reason, time.time())
    retune = (cfg.tune and backend.can_time and goto in ("rewriter", *TIER_NODE.values())
              and best.get("id") not in (None, "initial") and best.get("family") != "tune"
              and best.get("id") not in state.get("tuned_for", []))
    if retune:   # a new kernel won this round: its own launch configuration before the next rewrite
        upd["after_tune"], reason = goto, f"{reason}; tune {best['id']} first"
        goto = "tuner"
    if goto == "__end__" and state.get("human_feedback"):
        reason += "; the person's feedback is not used (no rewrite round follows)"
    upd["decisions"] = [Decision(node="select", kind="route", round=round_no, decision=goto, reason=reason,
                                 passed=passed, gain=gain).record()]
    if goto in TIER_NODE.values() and goto != "rewriter":
        upd["rounds_at_tier"] = 0
    if goto == "__end__":
        upd["status"] = "done"
    if checked:  # one line per round: which candidates passed, which failed and why
        failed = {v.get("candidate_id", v["id"]): v.get("klass") for v in state.get("verifications", [])
                  if v.get("candidate_id", v["id"]) in checked and not v.get("passed")}
        log.info("round_checked", round=round_no, passed=passed,
                 failed=[f"{cid} ({klass})" for cid, klass in failed.items()])
    log.info("decided", goto=goto, reason=reason, best=best.get("id"), speedup=best.get("speedup"))
    if goto == "__end__" and backend.nsight_compute and cfg.ncu and cfg.final_profile and best.get("measured") \
            and not state.get("final_profile"):
        upd["status"] = "final_profile"  # the profiler reads the counters of initial and best, then ends
        return Command(goto="profiler", update=upd)
    if goto == "__end__" and cfg.interactive:
        goto = "final_approval"  # a person accepts the best kernel first (agents/approval.py)
    return Command(goto="report" if goto == "__end__" else goto, update=upd)
