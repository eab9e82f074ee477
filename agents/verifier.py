"""Verifier agent: wires verification, timing, selection and routing (each a module of tools/verify).

- verification (``verify/verification.py``): every pending candidate through its own judge job;
- timing (``verify/timing.py``): the survivors against the initial kernel and the current best, side by side;
- selection (``verify/select.py``): the fastest survivor, kept only when it measurably beats the best;
- routing (``verify/route.py``): stop, rewrite again at the same tier, or escalate, from this evidence.
Without a timing backend, sufficiency cannot be measured: the verifier escalates after each round.
"""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from tritondx.agents.common import TIER_NODE, backend_of, logger, next_tier, run_config, run_dir
from tritondx.state import DXState
from tritondx.tools.run.phases import Phases
from tritondx.tools.report.closure import untried_route
from tritondx.tools.verify.select_untimed import unmeasured_choice
from tritondx.tools.records.evidence import ArtifactRef
from tritondx.tools.verify.route import Limits, RoundFacts, decide, escalation_why  # noqa: F401 (callers)
from tritondx.tools.verify.select import beats, measurements, pick, summarize_bench
from tritondx.tools.verify.staged import confirm, contenders, screen_note
from tritondx.tools.verify.timing import (HW_UNAVAILABLE, NCU_MISSING, claim_case, discard_early, early_hardware,
                                          hardware_check, initial_hardware, time_round, unused_device_seconds)
from tritondx.tools.verify.verification import verify_all

Next = Literal["tuner", "rewriter", "profiler", "ir_analyst", "compiler_expert", "final_approval", "report"]

#: kept for callers of the former names
_summarize_bench = summarize_bench
__all__ = ["verifier_node", "beats", "escalation_why", "_summarize_bench"]


def verifier_node(state: DXState, config: RunnableConfig) -> Command[Next]:
    log = logger("verifier", config)
    cfg = run_config(state)
    backend = backend_of(state)
    cands = {c["id"]: c for c in state.get("candidates", [])}
    pending = [cands[i] for i in state.get("pending", []) if i in cands]
    gpu_seconds = state.get("gpu_seconds", 0.0)
    # with the device seconds of early hardware measurements an earlier round discarded, ended since
    device_seconds = state.get("device_seconds", 0.0) + unused_device_seconds(run_dir(state))
    round_no = state.get("round", 0)

    ph = Phases()
    ops = state.get("probe", {}).get("ops", [])
    screen = backend.can_time and cfg.verify_screen   # listed shapes first, full checks for would-be winners
    with ph.time("verify"):
        verdicts = verify_all(state["task_path"], pending, backend, ops, cfg.verify_timeout_s, cfg.verify_parallel,
                              scope="screen" if screen else "full")
    verifications, passed = [], []
    for c, v in zip(pending, verdicts):
        if backend.can_time:
            gpu_seconds += v.seconds
            device_seconds += v.device_s
        verifications.append({**v.model_dump(exclude={"records"}), "id": c["id"]})
        log.info("verified", candidate=c["id"], family=c["family"], passed=v.passed, klass=v.klass,
                 reason=v.reason[:200], scope=v.scope)
        if v.passed:
            passed.append(c)
    insufficient = [fid for c in pending if c not in passed for fid in c["motivated_by"]]
    best = dict(state.get("best") or {})
    measured: list[dict] = []
    hw_early: dict = {}  # candidate id -> (bench case, its hardware measurement started beside its full checks)
    bench_artifacts: dict = {}
    gain = None
    if passed and backend.can_time:
        with ph.time("bench"):
            timed = time_round(state["task_path"], best, passed, backend, cfg.bench_rounds, cfg.bench_timeout_s)
        gpu_seconds += timed.seconds
        device_seconds += timed.device_seconds
        verifications += timed.rejected
        insufficient += [f for c in passed if c["id"] not in timed.survivors for f in c["motivated_by"]]
        passed = [c for c in passed if c["id"] in timed.survivors]
        if timed.result is not None:
            name = f"bench_round{round_no}"
            ref = ArtifactRef.write(run_dir(state) / "artifacts", f"{name}.json", json.dumps(timed.result, indent=1),
                                    "bench")
            bench_artifacts = {name: ref.model_dump()}
            summary = summarize_bench(timed.result, [v["id"] for v in timed.variants])
            base = summary["initial"]["median_ms"]
            prev_id = best.get("id", "initial")
            prev = summary.get(prev_id, summary["initial"])
            measured, impossible = measurements(summary, passed, round_no, prev)
            for c in impossible:
                verifications.append({"id": c["id"] + ":timing", "candidate_id": c["id"], "passed": False,
                                      "klass": "faster_than_roofline", "backend": backend.name,
                                      "reason": "measured time is below what the roofline allows"})
                passed.remove(c)
            eligible = {c["id"] for c in passed}
            if screen:   # only a candidate verified in full can win (tools/verify/staged.py)
                ids = contenders(timed.result, summary, measured, eligible, prev_id, cfg.full_verify_top)
                if ids and backend.nsight_compute and cfg.ncu:   # the hardware check, beside the full checks,
                    case0, _ = claim_case(timed.result, ids[0])   # at the bench case of its largest claimed gain:
                    hw_initial = initial_hardware(state["task_path"], backend, case=case0)   # the initial's half,
                    hw_early = {ids[0]: (case0, early_hardware(state["task_path"], cands[ids[0]]["path"], backend,
                                                               initial=hw_initial, case=case0))}   # the contender's
                with ph.time("verify"):
                    full = confirm(state["task_path"], [cands[i] for i in ids], backend, ops, cfg)
                eligible = {v.candidate_id for v in full if v.passed}
                for v in full:
                    gpu_seconds += v.seconds
                    device_seconds += v.device_s
                    entry = {**v.model_dump(exclude={"records"}), "id": v.candidate_id}
                    verifications = [entry if e["id"] == v.candidate_id else e for e in verifications]
                    log.info("verified", candidate=v.candidate_id, family=cands[v.candidate_id]["family"],
                             passed=v.passed, klass=v.klass, reason=v.reason[:200], scope=v.scope)
                    if not v.passed:
                        insufficient += cands[v.candidate_id]["motivated_by"]
                        passed = [c for c in passed if c["id"] != v.candidate_id]
                        measured = [m for m in measured if m["id"] != v.candidate_id]
            winner, why = pick(timed.result, summary, measured, eligible, prev_id)
            if winner and why and backend.nsight_compute and cfg.ncu:
                case, claimed = claim_case(timed.result, winner["id"])
                early_case, early = hw_early.pop(winner["id"], (None, None))
                if early is not None and early_case != case:
                    discard_early(run_dir(state), early)
                    early = None
                if claimed is None:   # no per-case times (not expected): the geomean claim at the first case
                    case, claimed = None, winner["speedup"]
                with ph.time("hwcheck"):
                    hw = hardware_check(state["task_path"], cands[winner["id"]]["path"], claimed, backend,
                                        initial=initial_hardware(state["task_path"], backend, case=case),
                                        measured=early, case=case)
                device_seconds += hw.device_seconds
                winner["hardware"] = {**hw.model_dump(), "started_beside_full_checks": early is not None}
                log.info("hardware_check", candidate=winner["id"], confirmed=hw.confirmed, note=hw.note[:200],
                         started_beside_full_checks=early is not None)
                if not hw.confirmed and not hw.note.startswith((NCU_MISSING, HW_UNAVAILABLE)):
                    verifications.append({"id": winner["id"] + ":hardware", "candidate_id": winner["id"],
                                          "passed": False, "klass": "hardware_unconfirmed", "backend": backend.name,
                                          "reason": f"claimed {hw.claimed:.2f}x (the largest per-case gain) not "
                                                    f"confirmed: {hw.note}"})
                    passed = [c for c in passed if c["id"] != winner["id"]]
                    winner, why = None, None
            for cid, (_, fut) in hw_early.items():   # started for a contender that did not win
                discard_early(run_dir(state), fut)
                log.info("hardware_check_unused", candidate=cid)
            if winner and why:
                gain = prev["median_ms"] / winner["median_ms"]
                winner["won"] = why
                best = {"id": winner["id"], "path": cands[winner["id"]]["path"], "median_ms": winner["median_ms"],
                        "speedup": winner["speedup"], "roofline_fraction": winner["roofline_fraction"],
                        "family": winner["family"], "measured": True}
                if winner.get("hardware"):  # what the report says of the claim: confirmed, or why not
                    best["hardware"] = {k: winner["hardware"].get(k)
                                        for k in ("confirmed", "measured", "claimed", "shape", "dtype", "note")}
            else:
                gain = 1.0
                best.update({"median_ms": prev["median_ms"], "speedup": base / prev["median_ms"],
                             "roofline_fraction": prev["roofline_fraction"], "measured": True})
                for c in passed:  # correct but no measurable gain: its evidence was not enough either
                    insufficient += c["motivated_by"]
    elif passed:
        # No timing backend: nothing is claimed faster (tools/verify/select_untimed.py says what is kept, and why).
        best = unmeasured_choice(passed, best, cfg.interactive, cfg.accept_unmeasured)
    tier_next = next_tier(state)
    outcome, reason = decide(
        RoundFacts(pending=bool(pending), passed=bool(passed), can_time=backend.can_time, gain=gain,
                   roofline_fraction=best.get("roofline_fraction"), rounds=round_no,
                   rounds_at_tier=state.get("rounds_at_tier", 0), device_seconds=gpu_seconds,
                   has_next_tier=tier_next is not None, feedback_pending=bool(state.get("human_feedback"))),
        Limits(target_fraction=cfg.target_fraction, max_rounds=cfg.max_rounds, gpu_budget_s=cfg.gpu_budget_s,
               min_gain=cfg.min_gain, max_rounds_per_tier=cfg.max_rounds_per_tier))
    goto = {"stop": "__end__", "same_tier": "rewriter", "extra_round": "rewriter"}.get(outcome) or TIER_NODE[tier_next]
    if outcome == "next_tier":
        reason = f"escalate to {tier_next}: {reason}"
    upd: dict = {"verifications": [screen_note(e) for e in verifications], "measurements": measured, "best": best, "pending": [],
                 "gpu_seconds": gpu_seconds, "device_seconds": device_seconds, "insufficient": insufficient,
                 "artifacts": bench_artifacts, "phase_seconds": ph.seconds}
    if goto == "__end__" and reason == "no tier left":   # every finding closed: try what was never tried
        forced = untried_route(state.get("findings", []), list(cands.values()), state.get("family_attempts", []),
                               list(state.get("insufficient", [])) + insufficient)
        if forced:
            goto, reason, upd["force_families"] = "rewriter", forced[1], forced[0]
    spent = sum((state.get("node_seconds") or {}).values()) + sum(ph.seconds.values())
    if cfg.wall_budget_s and goto != "__end__" and spent >= cfg.wall_budget_s:
        goto, reason = "__end__", f"wall budget spent ({spent:.0f} s of {cfg.wall_budget_s:.0f} s); {reason}"
    retune = (cfg.tune and backend.can_time and goto in ("rewriter", *TIER_NODE.values())
              and best.get("id") not in (None, "initial") and best.get("family") != "tune"
              and best.get("id") not in state.get("tuned_for", []))
    if retune:   # a new kernel won this round: its own launch configuration before the next rewrite
        upd["after_tune"], reason = goto, f"{reason}; tune {best['id']} first"
        goto = "tuner"
    if goto == "__end__" and state.get("human_feedback"):
        reason += "; the person's feedback is not used (no rewrite round follows)"
    upd["decisions"] = [{"node": "verifier", "round": round_no, "decision": goto, "reason": reason,
                         "passed": [c["id"] for c in passed], "gain": gain}]
    if goto in TIER_NODE.values() and goto != "rewriter":
        upd["rounds_at_tier"] = 0
    if goto == "__end__":
        upd["status"] = "done"
    if pending:  # one line per round: which candidates passed, which failed and why
        failed = {v.get("candidate_id", v["id"]): v.get("klass") for v in verifications if not v.get("passed")}
        log.info("round_checked", round=round_no, passed=[c["id"] for c in passed],
                 failed=[f"{cid} ({klass})" for cid, klass in failed.items()])
    log.info("decided", goto=goto, reason=reason, best=best.get("id"), speedup=best.get("speedup"))
    if goto == "__end__" and backend.nsight_compute and cfg.ncu and cfg.final_profile and best.get("measured") \
            and not state.get("final_profile"):
        upd["status"] = "final_profile"  # the profiler reads the counters of initial and best, then ends
        return Command(goto="profiler", update=upd)
    if goto == "__end__" and cfg.interactive:
        goto = "final_approval"  # a person accepts the best kernel first (agents/approval.py)
    return Command(goto="report" if goto == "__end__" else goto, update=upd)
