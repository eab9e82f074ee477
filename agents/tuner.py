"""Tuner agent: times many launch configurations of the current best version in one sandboxed job, and hands
only the winners to the verifier (``tools/tune``).

It runs first (after triage) and again whenever a round's winner came from a structural rewrite, so a new kernel
gets its own launch configuration before the next rewrite. Where it found winners, the structural rewrites the
evidence suggests, built on the best winner, join its round (``rewriter.beside_tune``). Without a GPU it screens
configurations for correctness only and proposes nothing (speed not measured).
"""

from __future__ import annotations

import time
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import backend_of, best_path, highest_tier, logger, run_config, run_dir
from tritondx.agents.rewriter import beside_tune
from tritondx.config import RunContext
from tritondx.state import DXState, add_seconds
from tritondx.tools.records.run import Candidate
from tritondx.tools.run.phases import entries
from tritondx.tools.records.evidence import ArtifactRef, Finding
from tritondx.tools.rewrite.base import family_signature
from tritondx.tools.tune.candidates import search_candidates
from tritondx.tools.tune.run import table, tune_task
from tritondx.tools.tune.search import EXTEND, WALL_CAP

#: findings that motivate a launch configuration change (what the winners cite)
LAUNCH_FAMILIES = ("launch_config", "autotune", "autotune_widen", "grid_to_cores", "persistent",
                   "pipelining", "grid_per_item", "rows_per_program", "split_reduction")


#: seconds the tune job's set-up and final timing and the round after it (checks, bench) take beside the search
TUNE_RESERVE_S = 45.0
#: the shortest search worth a job
MIN_TUNE_S = 5.0
#: seconds of search for one structural candidate's launch configuration (``tune_candidates``)
CANDIDATE_TUNE_S = 8.0


def tune_budget(budget_s: float, finish_by: float | None, now: float) -> tuple[float, bool, float | None]:
    """The search's budget (its own seconds, not its waits for the device), whether it may stretch while improving
    (``search.EXTEND``) and a cap on its wall time: as configured (the job's own cap), or, where a batch's deadline
    (``finish_by``) is near, what is left of it after the job's set-up and the round's checks and bench (at least
    ``MIN_TUNE_S``), not stretched, the wall capped at what is left."""
    if finish_by is None:
        return budget_s, True, None
    left = finish_by - now - TUNE_RESERVE_S
    if left >= budget_s * EXTEND * WALL_CAP:
        return budget_s, True, None
    if left >= budget_s * EXTEND:
        return budget_s, True, left
    return max(MIN_TUNE_S, min(budget_s, left)), False, max(MIN_TUNE_S, left)


Next = Literal["verifier", "rewriter", "approval", "profiler", "ir_analyst", "compiler_expert"]


def _launch_evidence(res, path: str, subject: str) -> list:
    """``triage_launches`` findings from the tune job's records (GPU, benchmark size): programs vs SMs, waves, work
    per program. Evidence only: a record the reader cannot use gives nothing."""
    from pathlib import Path

    from tritondx.tools.evidence.triage_launches import launch_findings
    try:
        found = launch_findings(res.launches, Path(path).read_text())
    except (SyntaxError, ValueError, KeyError, TypeError):
        return []
    for f in found:
        f.subject = subject
    return found


def _summary(res, rnd: int, subject: str, sid: str) -> dict:
    """One tuner run as the state keeps it (the report's compact block): launches, configurations, winners."""
    return {"id": sid, "round": rnd, "subject": subject, "ran": res.ran, "timed": res.timed,
            "error": res.error, "counts": res.counts(), "seconds": res.seconds,
            "device_seconds": res.device_seconds, "budget_s": res.budget_s, "table": table(res),
            "hot": res.hot, "launches": [{k: l[k] for k in ("kernel", "grid", "calls", "share")}
                                         for l in res.launches[:6]],
            "winners": [w.model_dump(exclude={"source"}) for w in res.winners]}


def tune_candidates(state: DXState, cfg, backend, records: list[dict], rnd: int, log, parents: dict[str, str]
                    ) -> tuple[list[dict], dict]:
    """The structural candidates among ``records``, each one's launch searched before it is verified
    (``tools/tune/candidates.py``; ``parents``: id -> source path). Returns the records and the state update (tune
    summaries, what counts as searched, cost)."""
    if not cfg.tune_candidates:
        return records, {}
    budget, _, wall_cap = tune_budget(min(cfg.tune_budget_s, CANDIDATE_TUNE_S), cfg.finish_by, time.time())

    def search(r: dict):
        return tune_task(r["path"], run_dir(state) / "tune" / f"r{rnd}_{r['id']}", backend, budget_s=budget,
                         extend=False, wall_cap_s=wall_cap)

    got = search_candidates(records, parents, search)
    if not got.results and not got.inherited:
        return records, {}
    summaries = [_summary(res, rnd, cid, f"tune_r{rnd}_{cid}") for cid, res in got.results.items()]
    log.info("tuned_candidates", round=rnd, tuned={cid: [w.label for w in res.winners]
                                                   for cid, res in got.results.items()},
             dropped=got.dropped, inherited=got.inherited)
    return got.records, {"tune": summaries, "tuned_for": list(got.results) + got.inherited,
                         "cost": entries(device_jobs=sum(r.seconds for r in got.results.values()),
                                         device_held=sum(r.device_seconds for r in got.results.values()))}


def tuner_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
               ) -> Command[Next]:
    log = logger("tuner", config)
    cfg = run_config(runtime)
    backend = backend_of(state, cfg)
    if state.get("to_tune"):   # the rewriter's structural candidates: each one's launch searched, then verified
        parents = {(state.get("best") or {}).get("id", "initial"): best_path(state)}
        records, update = tune_candidates(state, cfg, backend, state["to_tune"], state.get("round", 0), log, parents)
        update.update({"candidates": records, "pending": [r["id"] for r in records], "to_tune": []})
        return Command(goto="approval" if cfg.interactive else "verifier", update=update)
    best = state.get("best") or {}
    subject = best.get("id", "initial")
    rnd = state.get("round", 0) + 1
    folder = run_dir(state) / "tune" / f"r{rnd}_{subject}"
    budget, extend, wall_cap = tune_budget(cfg.tune_budget_s, cfg.finish_by, time.time())
    res = tune_task(best_path(state), folder, backend, budget_s=budget, extend=extend, wall_cap_s=wall_cap)
    ref = ArtifactRef.write(run_dir(state) / "artifacts", f"tune_r{rnd}.json",
                            (folder / "tune.json").read_text() if (folder / "tune.json").exists() else "{}", "tune")
    summary = _summary(res, rnd, subject, f"tune_r{rnd}")
    log.info("tuned", round=rnd, subject=subject, timed=res.timed, configurations=len(res.trials),
             winners=[w.label for w in res.winners], seconds=res.seconds, error=res.error[:160] or None)
    update: dict = {"tune": [summary], "tuned_for": [subject], "artifacts": {f"tune_r{rnd}": ref.model_dump()},
                    "cost": entries(device_jobs=res.seconds if backend.can_time else 0.0,
                                    device_held=res.device_seconds if backend.can_time else 0.0)}
    update["after_tune"] = None
    found = _launch_evidence(res, best_path(state), subject) if res.timed else []
    if found:   # grid and work per program at the benchmark size: evidence for this round and the next rewrite
        update["findings"] = [f.model_dump() for f in found]
    if not res.winners:   # where the verifier was routing before it sent the new best here (else the first rewrite)
        return Command(goto=state.get("after_tune") or "rewriter", update=update)
    motivated = [f["id"] for f in state.get("findings", []) + update.get("findings", [])
                 if set(f.get("suggests", [])) & set(LAUNCH_FAMILIES) and f["id"] not in state.get("insufficient", [])]
    cands = folder.parent.parent / "candidates"
    cands.mkdir(parents=True, exist_ok=True)
    records = []
    for i, w in enumerate(res.winners):
        cid = f"r{rnd}c{i + 1}"
        path = cands / f"{cid}_tune.py"
        path.write_text(w.source)
        params = {k.split(".", 1)[-1] if sum(1 for o in w.config if o.split(".", 1)[-1] == k.split(".", 1)[-1]) == 1
                  else k: v for k, v in w.config.items()}
        records.append(Candidate(
            id=cid, round=rnd, tier=highest_tier(state), family="tune", params=params,
            description=f"launch configuration {w.label}: the tuner's screen timed it {w.speedup:.2f}x vs {subject}"
                        + (f" at its autotuner's fastest own configuration ({w.against})" if w.against else "")
                        + f" ({w.median_ms * 1e3:.1f} vs {w.initial_ms * 1e3:.1f} us, spread {100 * w.spread:.0f}%)",
            motivated_by=motivated, prediction=f"{w.speedup:.2f}x (the screen's interleaved timing)", path=str(path),
            parent=subject, signature=family_signature("tune", w.config, w.source), origin="tuner").model_dump())
    if backend.can_time:   # the structural rewrites the evidence suggests, of the best winner, in the same round
        extra, trail = beside_tune(state, cfg, records[0]["path"], records[0]["id"],
                                   [Finding(**f) for f in update.get("findings", [])], rnd, len(records) + 1,
                                   subject=(subject, best_path(state)))
        if extra:
            log.info("proposed_beside_tune", round=rnd, candidates=[(r["id"], r["family"], r["parent"]) for r in extra])
        extra, tuned = tune_candidates(state, cfg, backend, extra, rnd, log,
                                       {records[0]["id"]: records[0]["path"], subject: best_path(state)})
        records += extra
        update["family_attempts"] = trail
        if tuned:   # the winners' search and the candidates' searches in one update
            update["tune"] += tuned["tune"]
            update["tuned_for"] += tuned["tuned_for"]
            update["cost"] = add_seconds(update["cost"], tuned["cost"])
    update.update({"candidates": records, "pending": [r["id"] for r in records], "round": rnd,
                   "rounds_at_tier": state.get("rounds_at_tier", 0) + 1})
    return Command(goto="approval" if cfg.interactive else "verifier", update=update)
