"""Profiler agent (tier 1): time the current best kernel on the device, place it on the roofline."""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from tritondx.agents.common import backend_of, best_path, dump, logger, run_config, run_dir
from tritondx.state import DXState
from tritondx.tools.evidence import ArtifactRef
from tritondx.tools.gpulock import gpu_exclusive
from tritondx.tools.ncu import counter_findings, profile_counters
from tritondx.tools.profiler import roofline_findings
from tritondx.tools.verifier import bench_variants


def profiler_node(state: DXState, config: RunnableConfig) -> Command[Literal["rewriter", "ir_analyst"]]:
    log = logger("profiler", config)
    cfg = run_config(state)
    backend = backend_of(state)
    goto = "ir_analyst" if cfg.mode == "diagnose" or cfg.all_tiers else "rewriter"
    update: dict = {"tiers_done": ["profile"]}
    if not backend.can_time:
        log.info("not_measured", backend=backend.name)
        update["decisions"] = [{"node": "profiler", "decision": "no timing",
                                "reason": f"{backend.describe()}: speed not measured, no profile evidence recorded"}]
        return Command(goto=goto, update=update)
    variants = [{"id": "initial", "path": state["task_path"]}]
    if best_path(state) != state["task_path"]:
        variants.append({"id": "best", "path": best_path(state)})
    result, error, seconds = bench_variants(state["task_path"], variants, backend, rounds=cfg.bench_rounds,
                                            timeout=cfg.bench_timeout_s)
    update["gpu_seconds"] = state.get("gpu_seconds", 0.0) + seconds
    if result is None:
        log.warning("profile_failed", error=error)
        update["decisions"] = [{"node": "profiler", "decision": "profile failed", "reason": error}]
        return Command(goto=goto, update=update)
    ref = ArtifactRef.write(run_dir(state) / "artifacts", f"profile_round{state.get('round', 0)}.json",
                            json.dumps(result, indent=1), "profile")
    found = roofline_findings(result, "best" if len(variants) > 1 else "initial")
    if cfg.ncu and backend.name == "cuda":
        with gpu_exclusive():
            rows, note = profile_counters(best_path(state))
        if rows:
            found += counter_findings(rows)
            ncu_ref = ArtifactRef.write(run_dir(state) / "artifacts", f"ncu_round{state.get('round', 0)}.json",
                                        json.dumps(rows, indent=1), "ncu")
            update.setdefault("artifacts", {})[f"ncu_round{state.get('round', 0)}"] = ncu_ref.model_dump()
        else:
            update["decisions"] = [{"node": "profiler", "decision": "no counters", "reason": note}]
    log.info("profiled", findings=len(found), seconds=round(seconds, 1))
    update["findings"] = dump(found)
    update["artifacts"] = {**update.get("artifacts", {}), f"profile_round{state.get('round', 0)}": ref.model_dump()}
    return Command(goto=goto, update=update)
