"""The tritondx state graph: six agents, escalation decided by the verifier.

Built once at module level, uncompiled; the caller compiles it with the checkpointer it needs
(``builder.compile(checkpointer=SqliteSaver(...))``).

    START -> triage -> tuner -> verifier | rewriter;  rewriter -> verifier --(verifier's evidence)--> rewriter |
             profiler | ir_analyst | compiler_expert | END, through the tuner first when the round's winner is a
             new kernel (a structural rewrite);  each tier node -> rewriter
    diagnose mode: triage -> profiler -> ir_analyst -> compiler_expert -> END
    --interactive: rewriter -> approval -> verifier | rewriter (feedback);
                   verifier (stop) -> final_approval -> END | rewriter | verifier
    (without --interactive the rewriter goes straight to the verifier and the verifier straight to END)
"""

from __future__ import annotations

import functools
import time
import typing

import structlog
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from tritondx.agents.approval import approval_node, final_approval_node
from tritondx.agents.compiler_expert import compiler_expert_node
from tritondx.agents.ir_analyst import ir_analyst_node
from tritondx.agents.profiler import profiler_node
from tritondx.agents.rewriter import rewriter_node
from tritondx.agents.triage import triage_node
from tritondx.agents.tuner import tuner_node
from tritondx.agents.verifier import verifier_node
from tritondx.state import DXState
from tritondx.tools.run.phases import with_node_rest



def _merged(state: dict, update: dict) -> dict:
    """The state after ``update``, through DXState's reducers (what the graph will hold next)."""
    hints = typing.get_type_hints(DXState, include_extras=True)
    out = dict(state)
    for key, value in update.items():
        meta = getattr(hints.get(key), "__metadata__", ())
        left = state.get(key)
        out[key] = meta[0](left, value) if meta and callable(meta[0]) and left is not None else value
    return out


RUNNER_WRITES_REPORT = "tritondx_runner_writes_report"  # configurable key set by runner.drive


def _write_report_at_end(cmd, state, config) -> None:
    """The node that ends a run writes its report files when nobody else will: a run started
    through the LangGraph API (``langgraph dev`` / Studio). The CLI's runner marks its runs in the
    config and writes them itself after the graph ends, with its own wall time."""
    if (config or {}).get("configurable", {}).get(RUNNER_WRITES_REPORT):
        return
    if not (isinstance(cmd, Command) and cmd.goto in ("__end__", END) and state.get("run_dir")):
        return
    final = _merged(state, cmd.update if isinstance(cmd.update, dict) else {})
    try:
        from pathlib import Path
        from tritondx.tools.report.writer import write_outputs
        write_outputs(Path(final["run_dir"]), final, sum((final.get("node_seconds") or {}).values()))
    except Exception as exc:  # the report is a view of the state: never fail a run over it
        structlog.get_logger("tritondx").warning("report_at_end_failed", error=f"{type(exc).__name__}: {exc}")


def timed(name: str, node):
    """The node, adding its wall seconds to ``node_seconds`` (what each tier's evidence costs);
    the node that ends the run also writes the report files."""
    @functools.wraps(node)
    def run(state, config):
        t0 = time.monotonic()
        cmd = node(state, config)
        if isinstance(cmd, Command) and isinstance(cmd.update, dict):
            wall = time.monotonic() - t0
            cmd.update["node_seconds"] = {name: wall}
            cmd.update["phase_seconds"] = with_node_rest(name, wall, cmd.update.get("phase_seconds"))
        _write_report_at_end(cmd, state, config)
        return cmd
    return run


def ending(node):
    """An approval node: writes the report files when it ends the run (see ``timed``)."""
    @functools.wraps(node)
    def run(state, config):
        cmd = node(state, config)
        _write_report_at_end(cmd, state, config)
        return cmd
    return run


builder = StateGraph(DXState)
builder.add_node("triage", timed("triage", triage_node))        # tier 0: source patterns, kernel class, probe
builder.add_node("profiler", timed("profiler", profiler_node))  # tier 1: device timing and roofline position
builder.add_node("ir_analyst", timed("ir_analyst", ir_analyst_node))  # tier 2: TTIR/TTGIR/PTX/SASS -> source
builder.add_node("compiler_expert", timed("compiler_expert", compiler_expert_node))  # tier 3: per-pass dumps
builder.add_node("tuner", timed("tuner", tuner_node))  # many launch configurations timed in one job; winners only
builder.add_node("rewriter", timed("rewriter", rewriter_node))  # candidates from the evidence (expert or LLM)
builder.add_node("verifier", timed("verifier", verifier_node))  # correctness, integrity, timing; routes
builder.add_node("approval", ending(approval_node))        # --interactive: a person reviews each candidate
builder.add_node("final_approval", ending(final_approval_node))  # --interactive: a person accepts the best
builder.add_edge(START, "triage")
