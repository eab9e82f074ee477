"""The tritondx state graph: six agents, escalation decided from the verifier's evidence.

Built once at module level, uncompiled; the caller compiles it with the checkpointer it needs
(``builder.compile(checkpointer=SqliteSaver(...))``).

    START -> triage -> tuner -> verifier | rewriter;  rewriter -> [tuner ->] verifier -> [bench ->] select
             (rewriter -> tuner: on a backend that times, each structural candidate's launch is searched first)
    select --(the round's evidence)--> rewriter | profiler | ir_analyst | compiler_expert | report, through the
             tuner first when the round's winner is a new kernel (a structural rewrite);  each tier node -> rewriter;
             report -> END  (bench: only on a backend that times kernels, when a candidate passed)
    diagnose mode: triage -> profiler -> ir_analyst -> compiler_expert -> report -> END
    --interactive: rewriter -> approval -> verifier | rewriter (feedback);
                   select (stop) -> final_approval -> report | rewriter | verifier
    (without --interactive the rewriter goes straight to the verifier and select straight to the report)

The report node writes the run's files; what a caller gives one invocation (its clock) comes as LangGraph's
runtime context (``RunContext``), not as state.
"""

from __future__ import annotations

import functools
import time

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from tritondx.agents.approval import approval_node, final_approval_node
from tritondx.agents.bench import bench_node
from tritondx.agents.compiler_expert import compiler_expert_node
from tritondx.agents.ir_analyst import ir_analyst_node
from tritondx.agents.profiler import profiler_node
from tritondx.agents.report import report_node
from tritondx.agents.rewriter import rewriter_node
from tritondx.agents.select import select_node
from tritondx.agents.triage import triage_node
from tritondx.agents.tuner import tuner_node
from tritondx.agents.verifier import verifier_node
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.run.phases import with_node



def timed(name: str, node, phase: str):
    """The node, adding its wall seconds to the cost ledger (what each tier's evidence costs) and what it did not
    time itself to its own ``phase`` (tools/run/phases.py)."""
    @functools.wraps(node)
    def run(state, config, runtime):
        t0 = time.monotonic()
        cmd = node(state, config, runtime)
        if isinstance(cmd, Command) and isinstance(cmd.update, dict):
            cmd.update["cost"] = with_node(name, phase, time.monotonic() - t0, cmd.update.get("cost"))
        return cmd
    return run


builder = StateGraph(DXState, context_schema=RunContext)
builder.add_node("triage", timed("triage", triage_node, "analysis:triage"))        # tier 0: source patterns, kernel class, probe
builder.add_node("profiler", timed("profiler", profiler_node, "analysis:profile"))  # tier 1: device timing and roofline position
builder.add_node("ir_analyst", timed("ir_analyst", ir_analyst_node, "analysis:ir"))  # tier 2: TTIR/TTGIR/PTX/SASS -> source
builder.add_node("compiler_expert", timed("compiler_expert", compiler_expert_node, "analysis:compiler"))  # tier 3: per-pass dumps
builder.add_node("tuner", timed("tuner", tuner_node, "tuner"))  # many launch configurations timed in one job; winners only
builder.add_node("rewriter", timed("rewriter", rewriter_node, "rewrite"))  # candidates from the evidence (expert or LLM)
builder.add_node("verifier", timed("verifier", verifier_node, "verify"))  # correctness and integrity: the judge
builder.add_node("bench", timed("bench", bench_node, "bench"))  # survivors timed side by side; the winner picked
builder.add_node("select", timed("select", select_node, "select"))  # the round's outcome; routes (verify/route.py)
builder.add_node("approval", approval_node)        # --interactive: a person reviews each candidate
builder.add_node("final_approval", final_approval_node)  # --interactive: a person accepts the best
builder.add_node("report", report_node)  # the run's files from the state's records; then the end
builder.add_edge(START, "triage")
builder.add_edge("report", END)
