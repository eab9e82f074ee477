"""Rewriter agent: proposes candidate kernels from the evidence (offline expert, or an LLM first).

Every candidate builds on the current best version and records the findings that motivated it.
With ``--llm`` the model is asked first; a proposal that is malformed or does not pass the static
check is fed back once, then the offline expert takes over for that round.
"""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import backend_of, best_spec, findings, highest_tier, logger, run_config, run_dir
from tritondx.config import RunConfig, RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Candidate, Decision
from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteContext
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.records.evidence import Finding
from tritondx.tools.rewrite.feedback import FeedbackPlan, read_feedback
from tritondx.tools.task.spec import TaskSpec, load_task


#: families whose whole job the tuner does (one verified candidate per configuration), on a backend that times: its
#: search covers every tile, warps and stages value of a kernel, an autotuned one's included. ``autotune`` and
#: ``autotune_widen`` were 4 of 165 rewrites applied in the committed batch results (bnb_quant_global_transpose 1.02-1.03x,
#: three times) and cost that task 180 s of verification and timing (an autotuner of many configs in every job)
TUNED_FAMILIES = {"launch_config", "autotune", "autotune_widen"}


def tuner_covered(state: DXState, cfg: RunConfig, can_time: bool) -> set[str]:
    """The families the tuner's search made redundant for the version being rewritten: it timed that version's
    launch space (``tuned_for``) or the version is one of its winners; none where nothing was timed."""
    best = state.get("best") or {}
    if cfg.tune and can_time and (best.get("id", "initial") in state.get("tuned_for", [])
                                  or best.get("family") == "tune"):
        return set(TUNED_FAMILIES)
    return set()


def _context(state: DXState, cfg: RunConfig, spec: TaskSpec | None = None, extra: tuple[Finding, ...] = ()
             ) -> RewriteContext:
    """What the expert reads: the best version (or ``spec``), the run's findings (and ``extra`` ones not yet in the
    state), what was tried and found insufficient."""
    probe = state.get("probe", {})
    tried = {c.get("signature", "") for c in state.get("candidates", [])}
    best = state.get("best") or {}
    unmeasured = ({c["family"] for c in state.get("candidates", []) if c["id"] == best.get("id")}
                  if best.get("measured") is False else set())
    if not backend_of(state, cfg).can_time and not cfg.interactive and not cfg.untimed_repeat_families:
        # nothing here tells a family's tuning variants apart: one that already passed is not proposed again
        # (tools/report/closure.py says so: "its last candidate could not be timed on this backend")
        passed = {v.get("candidate_id", v["id"]) for v in state.get("verifications", []) if v.get("passed")}
        unmeasured |= {c["family"] for c in state.get("candidates", []) if c["id"] in passed}
    return RewriteContext(
        spec=spec or best_spec(state), original=load_task(state["task_path"]),
        kernel_class=state.get("kernel_class", "other"), findings=findings(state) + list(extra),
        tolerances={k: tuple(v) for k, v in probe.get("tolerances", {}).items()},
        dtypes=probe.get("dtypes", []), tried=tried, insufficient=set(state.get("insufficient", [])),
        unmeasured_families=unmeasured, prefer=set(state.get("force_families") or []),
        can_time=backend_of(state, cfg).can_time)


def _llm_proposals(state: DXState, ctx: RewriteContext, log, cfg: RunConfig) -> tuple[list[Proposal], dict]:
    from tritondx.tools.llm.bridge import llm_propose
    return llm_propose(ctx, log, base_url=cfg.llm_base_url, model=cfg.llm_model,
                       history=[f"{c['id']} {c['family']}: {c['description']}" for c in state.get("candidates", [])],
                       feedback=state.get("human_feedback"), prev_usage=state.get("llm_usage"))


def _feedback_decision(rnd: int, note: str, by_llm: bool, plan: FeedbackPlan) -> dict:
    """How this round used a person's note: by the model, mapped to families for the expert, or not at all."""
    if by_llm:
        how, used = "the model's prompt carried it", True
    elif not plan.empty:
        how, used = (f"offline expert: avoid {', '.join(plan.avoid) or '-'}; "
                     f"try first {', '.join(plan.prefer) or '-'}"), True
    else:
        how, used = ("noted, offline expert cannot use free-text feedback (name a rewrite family to steer it, "
                     "e.g. 'no launch_config' or 'try autotune')"), False
    return Decision(node="rewriter", round=rnd, decision="feedback_used" if used else "feedback_noted",
                    reason=f"{how}: {note[:200]}").record()


def candidate_records(proposals: list[Proposal], state: DXState, rnd: int, tier: str, parent: str,
                      first: int = 1) -> list[dict]:
    """The proposals as the round's candidates (``r{rnd}c{first}``...), each source written to the run folder."""
    folder = run_dir(state) / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for i, p in enumerate(proposals, start=first):
        cid = f"r{rnd}c{i}"
        path = folder / f"{cid}_{p.family}.py"
        path.write_text(p.source)
        records.append(Candidate(id=cid, round=rnd, tier=tier, family=p.family, params=p.params,
                                 description=p.description, motivated_by=p.motivated_by, prediction=p.prediction,
                                 path=str(path), parent=parent, signature=p.signature,
                                 origin="llm" if p.family.startswith("llm") else "expert").model_dump())
    return records


def beside_tune(state: DXState, cfg: RunConfig, winner: str, parent: str, extra: list[Finding], rnd: int,
                first: int, subject: tuple[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """Structural rewrites of the tuner's best winner (its source at ``winner``, candidate ``parent``) that the
    evidence suggests, at most ``cfg.rewrites_beside_tune``, as candidates of the tuner's round, and the expert's
    trail: screened and timed beside the winners instead of waiting for a rewrite round of their own, which a
    batch's wall budget rarely leaves (H200 corpus batch_k of 2026-12-06: 22 of 34 runs ended after the tune round,
    among them bnb_quant_global_transpose before ``absmax_norm`` and headwise_layernorm before ``rows_per_program``).
    The tuner's own families are left out (its search did their job). No siblings: another size of the same rewrite
    is what that candidate's own search covers (``tune.candidates``), and a slot for it left the next family out
    (H100, session 38: headwise_layernorm's winner took two ``fuse_passes`` candidates, both rejected, and not the
    ``rows_per_program`` that had made it 3.81x; the task ended at 1.36x)."""
    if cfg.rewrites_beside_tune <= 0:
        return [], []
    ctx = _context(state, cfg, spec=load_task(winner), extra=tuple(extra))
    ctx.covered = set(TUNED_FAMILIES)
    trail: list[dict] = []
    proposals = propose(ctx, limit=cfg.rewrites_beside_tune, trail=trail, siblings=not cfg.tune_candidates)
    parents = [parent] * len(proposals)
    if subject is not None and subject[1] != winner:
        proposals, parents = _fallbacks_as_original(state, cfg, proposals, parents, subject, extra)
    records = candidate_records(proposals, state, rnd, highest_tier(state), parent, first)
    for r, p in zip(records, parents):
        r["parent"] = p
    return records, [{**t, "round": rnd} for t in trail]


def _unchecked_sides(original: str, source: str) -> int:
    """How many sides of the branches ``source`` adds to ``original`` the judge must see taken (the sides that run
    the original's code unchanged need no check: ``verify.plan.branches.added_branches``)."""
    from tritondx.tools.verify.plan.branches import added_branches
    try:
        return sum(len(b.needs) for b in added_branches(original, source))
    except SyntaxError:
        return 0


def _fallbacks_as_original(state: DXState, cfg: RunConfig, proposals: list[Proposal], parents: list[str],
                           subject: tuple[str, str], extra: list[Finding]) -> tuple[list[Proposal], list[str]]:
    """A rewrite that keeps the old code for the sizes it does not take (``if _row_block <= 16384: <new> else:
    <old>``) needs no check of that side where the old code is the original's; built on the tuner's winner, the old
    side holds the winner's launch values and the judge must see it taken, which no checked size may do (H100 corpus
    batch of 2026-12-07: headwise_layernorm's row_resident and rows_per_program candidates, both built on the
    winner's ``num_warps=1``, rejected as ``unchecked_branch``). Such a proposal is replaced by the same family's
    built on the tuned subject (``subject``: id, path) where that leaves fewer sides to check; the candidate's own
    launch search (``tune_candidates``) then tunes it."""
    original = load_task(state["task_path"]).source
    need = [_unchecked_sides(original, p.source) for p in proposals]
    if not any(need):
        return proposals, parents
    sctx = _context(state, cfg, spec=load_task(subject[1]), extra=tuple(extra))
    sctx.covered = set(TUNED_FAMILIES)
    alts: dict[tuple[str, str], Proposal] = {}   # the same rewrite (family and params: its kernel, its size)
    for a in propose(sctx, limit=len(proposals) + cfg.rewrites_beside_tune, siblings=not cfg.tune_candidates):
        alts.setdefault((a.family, json.dumps(a.params, sort_keys=True, default=str)), a)
    out, outp = [], []
    for p, par, n in zip(proposals, parents, need):
        a = alts.get((p.family, json.dumps(p.params, sort_keys=True, default=str)))
        if n and a is not None and _unchecked_sides(original, a.source) < n:
            p, par = a, subject[0]
        out.append(p)
        outp.append(par)
    return out, outp


def rewriter_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                  ) -> Command[Literal["tuner", "verifier", "approval"]]:
    log = logger("rewriter", config)
    cfg = run_config(runtime)
    ctx = _context(state, cfg)
    note = state.get("human_feedback")
    plan = read_feedback(note, CATALOG)
    ctx.avoid, ctx.prefer = set(plan.avoid), ctx.prefer | set(plan.prefer)
    ctx.covered = tuner_covered(state, cfg, backend_of(state, cfg).can_time)
    proposals: list[Proposal] = []
    update: dict = {}
    if cfg.llm:
        proposals, usage = _llm_proposals(state, ctx, log, cfg)
        update["llm_usage"] = usage
    by_llm = bool(proposals)
    rnd = state.get("round", 0) + 1
    trail: list[dict] = []
    if not proposals:
        # without timing, variants of one family that differ in tuning values cannot be told apart:
        # verify fewer of them per round (every family still gets its candidate); a person reviewing
        # candidates (--interactive) sees them all. Where each candidate's launch is searched before it is verified
        # (agents/tuner.py), a family's other size is a sibling its first one's search covers and drops
        # (tune.candidates): it leaves its slot to the next family the evidence suggests
        can_time = backend_of(state, cfg).can_time
        per_family = None if can_time or cfg.interactive else cfg.untimed_per_family
        searched = can_time and cfg.tune and cfg.tune_candidates and not cfg.interactive
        proposals = propose(ctx, limit=cfg.candidates_per_round, trail=trail, per_family=per_family,
                            siblings=not searched)
    update["family_attempts"] = [{**t, "round": rnd} for t in trail]
    update["force_families"] = []
    tier = highest_tier(state)
    records = candidate_records(proposals, state, rnd, tier, (state.get("best") or {}).get("id", "initial"))
    log.info("proposed", round=rnd, tier=tier, candidates=[(r["id"], r["family"]) for r in records])
    update.update({"candidates": records, "pending": [r["id"] for r in records], "round": rnd,
                   "rounds_at_tier": state.get("rounds_at_tier", 0) + 1})
    if note:
        decision = _feedback_decision(rnd, note, by_llm, plan)
        used = decision["decision"] == "feedback_used"
        for r in records if used else []:
            r["human_feedback"] = note
        log.info("human_feedback_used" if used else "human_feedback_noted", how=decision["reason"][:300])
        update["decisions"] = [decision]
        update["human_feedback"] = None  # this round had its chance to use it
    if cfg.tune and cfg.tune_candidates and backend_of(state, cfg).can_time and \
            any(r["family"] != "tune" for r in records):   # each one's launch searched first (agents/tuner.py)
        update["to_tune"] = records
        update.pop("candidates")
        update.pop("pending")
        return Command(goto="tuner", update=update)
    # --interactive: a person reviews the candidates first (agents/approval.py)
    return Command(goto="approval" if cfg.interactive else "verifier", update=update)
