"""Bench node: the round's survivors timed side by side with the initial kernel and the current best on the
device (``tools/verify/timing.py``), the would-be winners' full checks where the verifier only screened them
(``tools/verify/staged.py``), the winner picked (``tools/verify/select.py``: faster beyond the measured spread)
and its claim checked against the hardware counters where ncu is on (``timing.hardware_check``). Then ``select``.
"""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import backend_of, logger, run_config, run_dir
from tritondx.agents.verifier import judged
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.evidence import ArtifactRef
from tritondx.tools.records.run import Verification
from tritondx.tools.run.phases import Phases, entries
from tritondx.tools.verify.select import measurements, pick, summarize_bench
from tritondx.tools.verify.staged import confirm, contenders, screen_note
from tritondx.tools.verify.timing import (HW_UNAVAILABLE, NCU_MISSING, claim_case, discard_early, early_hardware,
                                          hardware_check, initial_hardware, time_round)


def bench_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
               ) -> Command[Literal["select"]]:
    log = logger("bench", config)
    cfg = run_config(runtime)
    backend = backend_of(state, cfg)
    cands = {c["id"]: c for c in state.get("candidates", [])}
    result = dict(state.get("round_result") or {})
    passed = [cands[i] for i in result.get("passed", [])]
    round_no = state.get("round", 0)
    screen = cfg.verify_screen
    ph = Phases()
    jobs = held = 0.0
    verifications: list[dict] = []
    insufficient: list[str] = []
    best = dict(state.get("best") or {})
    measured: list[dict] = []
    bench_artifacts: dict = {}
    hw_early: dict = {}  # candidate id -> (bench case, its hardware measurement started beside its full checks)
    with ph.time("bench"):
        timed = time_round(state["task_path"], best, passed, backend, cfg.bench_rounds, cfg.bench_timeout_s)
    jobs, held = jobs + timed.seconds, held + timed.device_seconds
    verifications += timed.rejected
    insufficient += [f for c in passed if c["id"] not in timed.survivors for f in c["motivated_by"]]
    passed = [c for c in passed if c["id"] in timed.survivors]
    gain = None
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
            verifications.append(Verification.of(c["id"], "timing", False, "faster_than_roofline",
                                                 "measured time is below what the roofline allows", backend.name))
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
                full = confirm(state["task_path"], [cands[i] for i in ids], backend,
                               state.get("probe", {}).get("ops", []), cfg)
            eligible = {v.candidate_id for v in full if v.passed}
            for v in full:
                jobs, held = jobs + v.seconds, held + v.device_s
                verifications.append(judged(v.candidate_id, v))
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
            held += hw.device_seconds
            winner["hardware"] = {**hw.model_dump(), "started_beside_full_checks": early is not None}
            log.info("hardware_check", candidate=winner["id"], confirmed=hw.confirmed, note=hw.note[:200],
                     started_beside_full_checks=early is not None)
            if not hw.confirmed and not hw.note.startswith((NCU_MISSING, HW_UNAVAILABLE)):
                verifications.append(Verification.of(
                    winner["id"], "hardware", False, "hardware_unconfirmed",
                    f"claimed {hw.claimed:.2f}x (the largest per-case gain) not confirmed: {hw.note}", backend.name))
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
    return Command(goto="select", update={
        "verifications": [screen_note(e) for e in verifications], "measurements": measured, "best": best,
        "insufficient": insufficient, "artifacts": bench_artifacts,
        "round_result": {**result, "passed": [c["id"] for c in passed], "gain": gain},
        "cost": entries(ph.seconds, jobs, held)})
