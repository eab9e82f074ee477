"""Triage agent (tier 0): classify the kernel and spot source patterns; no compile, no device."""

from __future__ import annotations

import os
import shutil
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import dump, ensure_run_dir, ir_reads_initial, logger, run_config
from tritondx.errors import TaskFormatError
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.run.phases import Phases, entries
from tritondx.tools.task.spec import load_task
from tritondx.tools.evidence import ahead
from tritondx.tools.evidence.triage import triage
from tritondx.tools.verify import servers
from tritondx.tools.task.probe_job import probe_task
from tritondx.tools.verify.timing import HW_INITIAL_AT_ENV, initial_hardware


def triage_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                ) -> Command[Literal["tuner", "rewriter", "profiler"]]:
    log = logger("triage", config)
    cfg = run_config(runtime)
    folder = ensure_run_dir(state, config)  # an API/Studio input gives only task_path and config
    initial = folder / "task_initial.py"
    if not initial.exists():
        shutil.copyfile(state["task_path"], initial)
    backend = get_backend(cfg.backend)
    ph = Phases()
    try:
        spec = load_task(initial)
        with ph.time("probe"):
            probe = probe_task(str(initial), backend)
    except TaskFormatError as exc:  # name the user's file, not the run folder's copy of it
        raise TaskFormatError(state["task_path"], exc.problem) from None
    if cfg.mode != "diagnose":   # a usable task: the judge's start (Python, torch, warm runners) overlaps the rewrite
        if cfg.verifier == "judge":   # (a test's no-op verifier never asks it)
            servers.prestart(str(initial), backend, cfg.verify_parallel)
        if backend.nsight_compute and cfg.ncu and os.environ.get(HW_INITIAL_AT_ENV, "triage") == "triage":
            # the initial kernel's half of a hardware check, in the background, behind every urgent ncu session
            initial_hardware(str(initial), backend, speculative=True)
    target = cfg.target or backend.default_ir_target()
    if ir_reads_initial(cfg, backend.can_time):  # the IR tier's compile, on the core round 1 leaves idle
        ahead.start(str(initial), target, folder)
    kclass, found = triage(spec)
    log.info("triaged", kernel_class=kclass, findings=len(found), backend=backend.name, target=target)
    goto = "profiler" if cfg.mode == "diagnose" or cfg.all_tiers else "tuner" if cfg.tune else "rewriter"
    return Command(goto=goto, update={
        "run_dir": str(folder), "task_path": str(initial), "task_name": spec.name, "kernel_class": kclass,
        "backend": backend.name, "target": target, "probe": probe, "findings": dump(found), "tiers_done": ["triage"],
        "best": {"id": "initial", "path": str(initial), "median_ms": None, "speedup": 1.0},
        "round": 0, "rounds_at_tier": 0, "status": "running", "cost": entries(ph.seconds),
    })
