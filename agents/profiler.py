"""Profiler agent (tier 1): time the current best kernel on the device, place it on the roofline."""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import TIER_NODE, backend_of, best_path, dump, logger, next_tier, run_config, run_dir
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Decision
from tritondx.tools.backends.targets import adapter_for
from tritondx.tools.records.evidence import ArtifactRef
from tritondx.tools.evidence.ncu import (NcuSession, counter_findings, counter_summary, measured_work,
                                         profile_session)
from tritondx.tools.run.phases import Phases, entries
from tritondx.tools.evidence.profiler import roofline_findings
from tritondx.tools.verify.timing import bench_variants
from tritondx.tools.evidence.work import first_bench_shape, work_for_bench


def _counters(path: str, original: str) -> tuple[NcuSession, float]:
    """ncu's session over ``path`` (the launch job holds the profiler lock and the device lock itself) and the wall
    seconds it took."""
    t0 = time.monotonic()
    s = profile_session(path, original=original)
    return s, time.monotonic() - t0


def round_bench(state: DXState) -> dict | None:
    """The bench of the round that escalated here, as this tier's bench answer (variants ``initial`` and, when the
    best is another kernel, ``best``), when that round timed both: its one bench job times the initial kernel, the
    previous best and every survivor side by side (``verify/timing.time_round``). None when it did not (no
    candidate survived the checks, no bench, a changed or missing artifact): this tier then benches them itself."""
    ref = (state.get("artifacts") or {}).get(f"bench_round{state.get('round', 0)}")
    best_id = (state.get("best") or {}).get("id") or "initial"
    if not ref:
        return None
    try:
        art = ArtifactRef(**ref)
        data = Path(art.path).read_bytes()
        if hashlib.sha256(data).hexdigest() != art.sha256:
            return None
        result = json.loads(data)
        shapes = []
        for entry in result["shapes"]:
            got = entry["variants"]
            if "initial" not in got or best_id not in got:
                return None
            keep = {"initial": got["initial"], **({"best": got[best_id]} if best_id != "initial" else {})}
            shapes.append({**entry, "variants": keep})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {**result, "shapes": shapes, "reused_from": art.path}


def final_profile(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                  ) -> Command:
    """After the search: hardware counters of the initial kernel and of the accepted best, side by
    side, so that every report on a GPU with ncu carries them (the search may have stopped before
    the profile tier). Not a tier: it adds no findings and no rewrite follows it."""
    log = logger("profiler", config)
    cfg = run_config(runtime)
    out: dict = {"ncu": None, "kernels": {}}
    ph = Phases()
    arts: dict = {}
    paths = {"initial": state["task_path"]}
    if best_path(state) != state["task_path"]:
        paths["best"] = best_path(state)
    notes = []
    device_s = 0.0
    for label, path in paths.items():
        with ph.time("ncu"):
            # the launch job holds the device lock while ncu replays
            s = profile_session(path, original=state["task_path"])
        rows, note = s.rows, s.note
        device_s += s.device_seconds
        if rows:
            out["kernels"][label] = counter_summary(rows)
            ref = ArtifactRef.write(run_dir(state) / "artifacts", f"ncu_final_{label}.json",
                                    json.dumps(rows, indent=1), "ncu")
            arts[f"ncu_final_{label}"] = ref.model_dump()
        else:
            notes.append(f"{label}: {note}")
    out["ncu"] = "ok" if out["kernels"] else "; ".join(notes)
    log.info("final_profile", kernels={k: len(v) for k, v in out["kernels"].items()}, note="; ".join(notes)[:200])
    goto = "final_approval" if cfg.interactive else "report"
    return Command(goto=goto, update={"final_profile": out, "artifacts": arts, "status": "done",
                                      "cost": entries(ph.seconds, device_held=device_s),
                                      "decisions": [Decision(node="profiler", decision="final profile",
                                                             reason="ncu counters of the initial and best kernels"
                                                             if out["kernels"] else out["ncu"]).record()]})


def profiler_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                  ) -> Command[Literal["rewriter", "ir_analyst",
                                                                          "compiler_expert", "final_approval",
                                                                          "report"]]:
    if state.get("status") == "final_profile":
        return final_profile(state, config, runtime)
    log = logger("profiler", config)
    cfg = run_config(runtime)
    backend = backend_of(state, cfg)
    goto = "ir_analyst" if cfg.mode == "diagnose" or cfg.all_tiers else "rewriter"
    update: dict = {"tiers_done": ["profile"]}
    if not backend.can_time:
        log.info("not_measured", backend=backend.name)
        reason = f"{backend.describe()}: speed not measured, no profile evidence recorded"
        nxt = next_tier({**state, "tiers_done": [*state.get("tiers_done", []), "profile"]}, cfg)
        if goto == "rewriter" and nxt is not None:
            # no new evidence: a rewrite round now would repeat the last one; gather the next tier's first
            goto = TIER_NODE[nxt]
            reason += f"; on to the {nxt} tier without a rewrite round"
            update["rounds_at_tier"] = 0
        update["decisions"] = [Decision(node="profiler", decision="no timing", reason=reason).record()]
        return Command(goto=goto, update=update)
    variants = [{"id": "initial", "path": state["task_path"]}]
    if best_path(state) != state["task_path"]:
        variants.append({"id": "best", "path": best_path(state)})
    ph = Phases()
    use_ncu = bool(cfg.ncu and backend.nsight_compute)
    t0 = time.monotonic()
    counters = None
    reused = round_bench(state)   # the round that escalated timed the initial and the best already
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-profile-ncu") as pool:
        # the counters beside the bench (two jobs with locks of their own: the bench's device lock, ncu's
        # profiler lock); the overlap counts as ncu in the phase seconds
        if use_ncu:
            counters = pool.submit(_counters, best_path(state), state["task_path"])
        if reused is not None:
            result, error, seconds = reused, "", 0.0
            log.info("bench_reused", artifact=f"bench_round{state.get('round', 0)}")
        else:
            result, error, seconds = bench_variants(state["task_path"], variants, backend, rounds=cfg.bench_rounds,
                                                    timeout=cfg.bench_timeout_s)
        t_bench = time.monotonic() - t0
        session, ncu_s = counters.result() if counters is not None else (NcuSession(), 0.0)
        rows, note, ncu_device_s = session.rows, session.note, session.device_seconds
    if use_ncu:
        ph.add("ncu", ncu_s)
    ph.add("bench", max(0.0, time.monotonic() - t0 - ncu_s) if use_ncu else t_bench)
    update["cost"] = entries(ph.seconds, seconds, ncu_device_s + ((result or {}).get("device_seconds", 0.0)
                                                                  if reused is None else 0.0))
    if result is None:
        log.warning("profile_failed", error=error)
        update["decisions"] = [Decision(node="profiler", decision="profile failed", reason=error).record()]
        return Command(goto=goto, update=update)
    if use_ncu:   # what the ncu session cost: the profiler lock's hold and the launch job's steps
        result = {**result, "ncu_session": {"wall_s": round(ncu_s, 3),
                                            **session.model_dump(include={"device_seconds", "profiler_seconds",
                                                                          "steps"})}}
    ref = ArtifactRef.write(run_dir(state) / "artifacts", f"profile_round{state.get('round', 0)}.json",
                            json.dumps(result, indent=1), "profile")
    found, ncu_work = [], None
    if use_ncu:
        if rows:
            found += counter_findings(rows)
            ncu_work = measured_work(rows)
            ncu_ref = ArtifactRef.write(run_dir(state) / "artifacts", f"ncu_round{state.get('round', 0)}.json",
                                        json.dumps(rows, indent=1), "ncu")
            update.setdefault("artifacts", {})[f"ncu_round{state.get('round', 0)}"] = ncu_ref.model_dump()
        else:
            update["decisions"] = [Decision(node="profiler", decision="no counters", reason=note).record()]
    # FLOPs and bytes the task does not declare: counted from the measured kernel's IR (and ncu)
    work = work_for_bench(best_path(state), result, ncu_work, first_bench_shape(best_path(state)), state["target"]) \
        if adapter_for(state["target"]).triton_capture else None
    found = roofline_findings(result, "best" if len(variants) > 1 else "initial", work) + found
    for f in found:  # the version the evidence was read from
        f.subject = (state.get("best") or {}).get("id") or "initial"
    log.info("profiled", findings=len(found), seconds=round(seconds, 1))
    update["findings"] = dump(found)
    update["artifacts"] = {**update.get("artifacts", {}), f"profile_round{state.get('round', 0)}": ref.model_dump()}
    return Command(goto=goto, update=update)
