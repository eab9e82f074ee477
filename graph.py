"""The tritondx state graph: six agents, escalation decided by the verifier.

Built once at module level, uncompiled; the caller compiles it with the checkpointer it needs
(``builder.compile(checkpointer=SqliteSaver(...))``).

    START -> triage -> rewriter -> verifier --(verifier's evidence)--> rewriter | profiler |
             ir_analyst | compiler_expert | END;  each tier node -> rewriter
    diagnose mode: triage -> profiler -> ir_analyst -> compiler_expert -> END
    --interactive: rewriter -> approval -> verifier | rewriter (feedback);
                   verifier (stop) -> final_approval -> END | rewriter | verifier
    (without --interactive the rewriter goes straight to the verifier and the verifier straight to END)
"""

from __future__ import annotations

import functools
import time

from langgraph.graph import START, StateGraph
from langgraph.types import Command

from tritondx.agents.approval import approval_node, final_approval_node
from tritondx.agents.compiler_expert import compiler_expert_node
from tritondx.agents.ir_analyst import ir_analyst_node
from tritondx.agents.profiler import profiler_node
from tritondx.agents.rewriter import rewriter_node
from tritondx.agents.triage import triage_node
from tritondx.agents.verifier import verifier_node
from tritondx.state import DXState



def timed(name: str, node):
    """The node, adding its wall seconds to ``node_seconds`` (what each tier's evidence costs)."""
    @functools.wraps(node)
    def run(state, config):
        t0 = time.monotonic()
        cmd = node(state, config)
        if isinstance(cmd, Command) and isinstance(cmd.update, dict):
            cmd.update["node_seconds"] = {name: time.monotonic() - t0}
        return cmd
    return run


builder = StateGraph(DXState)
builder.add_node("triage", timed("triage", triage_node))        # tier 0: source patterns, kernel class, probe
builder.add_node("profiler", timed("profiler", profiler_node))  # tier 1: device timing and roofline position
builder.add_node("ir_analyst", timed("ir_analyst", ir_analyst_node))  # tier 2: TTIR/TTGIR/PTX/SASS -> source
builder.add_node("compiler_expert", timed("compiler_expert", compiler_expert_node))  # tier 3: per-pass dumps
builder.add_node("rewriter", timed("rewriter", rewriter_node))  # candidates from the evidence (expert or LLM)
builder.add_node("verifier", timed("verifier", verifier_node))  # correctness, integrity, timing; routes
builder.add_node("approval", approval_node)                # --interactive: a person reviews each candidate
builder.add_node("final_approval", final_approval_node)    # --interactive: a person accepts the best kernel
builder.add_edge(START, "triage")
