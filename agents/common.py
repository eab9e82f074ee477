"""Helpers every agent node uses: config, run folder, logging bound to node/thread/checkpoint."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import structlog
from langchain_core.runnables import RunnableConfig

from langgraph.runtime import Runtime

from tritondx.config import RunConfig, RunContext
from tritondx.state import DXState
from tritondx.tools.backends.base import Backend
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.evidence import TIERS, Finding
from tritondx.tools.task.spec import TaskSpec, load_task

# Graph node that gathers each tier's evidence.
TIER_NODE = {"triage": "triage", "profile": "profiler", "ir": "ir_analyst", "compiler": "compiler_expert"}


def run_config(runtime: Runtime[RunContext] | None) -> RunConfig:
    """The run's settings, from LangGraph's runtime context (``config.RunContext``); the defaults without one."""
    context = getattr(runtime, "context", None)
    return context.config if isinstance(context, RunContext) else RunConfig()


def runtime_for(cfg: RunConfig) -> Runtime[RunContext]:
    """The runtime a node gets for ``cfg`` (what LangGraph passes inside a graph; a caller of a node outside one)."""
    return Runtime(context=RunContext(config=cfg))


def logger(node: str, config: RunnableConfig | None):
    conf = (config or {}).get("configurable", {})
    meta = (config or {}).get("metadata", {})
    checkpoint = conf.get("checkpoint_id") or (conf.get("checkpoint_map") or {}).get("")
    return structlog.get_logger("tritondx").bind(node=node, thread_id=conf.get("thread_id"),
                                                 checkpoint_id=checkpoint, step=meta.get("langgraph_step"))


def backend_of(state: DXState, cfg: RunConfig) -> Backend:
    return get_backend(state.get("backend") or cfg.backend)


def run_dir(state: DXState) -> Path:
    return Path(state["run_dir"])


def ensure_run_dir(state: DXState, config: RunnableConfig | None) -> Path:
    """The run folder, made here when the input names none.

    ``tritondx optimize`` (runner.py) makes the folder and puts ``run_dir`` in the input. A run started
    through the LangGraph API (``langgraph dev``, Studio) gives only ``task_path`` (and a context): then
    the folder is ``$TRITONDX_RUNS`` (default ``runs/`` under the server's working directory)
    ``/<time>-<task stem>-<thread id>``; its candidates and artifacts go there, its checkpoints stay
    in the server's own store (no ``run.json``, so ``tritondx runs`` does not list it); its report node
    writes the report there."""
    if state.get("run_dir"):
        return Path(state["run_dir"])
    load_task(state["task_path"])  # bad input: a one-line TaskFormatError and no folder left behind
    thread = str(((config or {}).get("configurable") or {}).get("thread_id") or "")[:8] or os.urandom(3).hex()
    stem = Path(state["task_path"]).stem
    folder = Path(os.environ.get("TRITONDX_RUNS", "runs")) / f"{time.strftime('%Y%m%d-%H%M%S')}-{stem}-{thread}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def best_path(state: DXState) -> str:
    best = state.get("best") or {}
    return best.get("path") or state["task_path"]


def best_spec(state: DXState) -> TaskSpec:
    return load_task(best_path(state))


def findings(state: DXState) -> list[Finding]:
    return [Finding(**f) for f in state.get("findings", [])]


def highest_tier(state: DXState) -> str:
    done = state.get("tiers_done", [])
    return max(done, key=TIERS.index) if done else "triage"


def next_tier(state: DXState, cfg: RunConfig) -> str | None:
    done = set(state.get("tiers_done", []))
    limit = TIERS.index(cfg.stop_after_tier) if cfg.stop_after_tier in TIERS else len(TIERS) - 1
    for t in TIERS[: limit + 1]:
        if t not in done:
            return t
    return None


def dump(models: list[Any]) -> list[dict]:
    return [m.model_dump() for m in models]


def ir_reads_initial(cfg: RunConfig, can_time: bool) -> bool:
    """Whether the IR tier is certain to compile the initial kernel after round 1 (triage then starts that
    capture ahead, ``tools/evidence/ahead.py``): an optimize run on a backend that cannot time kernels (the
    verifier escalates after every round, and no candidate becomes the best: none is taken unmeasured, by a
    person or ``--accept-unmeasured``), with a round left for the IR tier and the IR tier not cut off."""
    if can_time or cfg.mode != "optimize" or cfg.interactive or cfg.accept_unmeasured:
        return False
    if cfg.stop_after_tier in TIERS and TIERS.index(cfg.stop_after_tier) < TIERS.index("ir"):
        return False
    return cfg.all_tiers or cfg.max_rounds >= 2
