"""Checkpoints load plain data only; the graph with its approval nodes stays drawable."""

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, Interrupt, Send
from pydantic import BaseModel

from tritondx.checkpoints import DisallowedCheckpointType, StrictSerializer, open_checkpointer


class _Model(BaseModel):
    x: int = 1


class _S(TypedDict, total=False):
    items: Annotated[list, operator.add]
    extra: Any


def _toy(saver, extra):
    def node(state):
        return {"items": [{"a": 1, "b": [1.5, None, "s"]}], "extra": extra}
    b = StateGraph(_S)
    b.add_node("node", node)
    b.add_edge(START, "node")
    return b.compile(checkpointer=saver)


def test_plain_data_and_langgraph_records_round_trip():
    s = StrictSerializer()
    value = {"a": [1, 2.5, "x", None, True, {"b": {}}], "intr": [Interrupt(value=[{"kind": "candidate"}], id="i")],
             "cmd": Command(resume=[{"type": "accept"}]), "send": Send("verifier", {"x": 1})}
    back = s.loads_typed(s.dumps_typed(value))
    assert isinstance(back["cmd"], Command) and isinstance(back["intr"][0], Interrupt)
    assert repr(back) == repr(value)


@pytest.mark.parametrize("bad", [Path("/etc/passwd"), _Model(), {1, 2}, {"deep": [{"p": Path("/x")}]},
                                 __import__("decimal").Decimal("1.5")])
def test_other_types_fail_to_load(bad):
    s = StrictSerializer()
    with pytest.raises(DisallowedCheckpointType, match="plain data only"):
        s.loads_typed(s.dumps_typed(bad))


def test_pickle_and_json_constructors_refused():
    import json
    import pickle
    s = StrictSerializer()
    with pytest.raises(DisallowedCheckpointType):
        s.loads_typed(("pickle", pickle.dumps({"a": 1})))
    lc = {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["true"]}
    with pytest.raises(DisallowedCheckpointType):
        s.loads_typed(("json", json.dumps(lc).encode()))


def test_a_checkpoint_with_a_foreign_type_fails_to_load(tmp_path):
    # written by a permissive saver (as a tampered or foreign database would be) ...
    permissive = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False),
                             serde=JsonPlusSerializer(allowed_msgpack_modules=True))
    cfg = {"configurable": {"thread_id": "t"}}
    _toy(permissive, {"path": Path("/tmp/x")}).invoke({"items": []}, cfg)
    ok_dir = tmp_path / "ok"
    ok_dir.mkdir()
    plain = open_checkpointer(ok_dir)
    _toy(plain, {"path": "/tmp/x"}).invoke({"items": []}, cfg)
    assert _toy(plain, None).get_state(cfg).values["extra"] == {"path": "/tmp/x"}
    # ... and read back through the project's saver: refused, not rebuilt
    strict = open_checkpointer(tmp_path)
    with pytest.raises(DisallowedCheckpointType, match="pathlib"):
        _toy(strict, None).get_state(cfg)


def test_runner_uses_the_strict_serializer(tmp_path):
    from tritondx.runner import open_checkpointer as runner_open
    assert isinstance(runner_open(tmp_path).serde, StrictSerializer)


def test_graph_with_approvals_is_drawable():
    from tritondx.graph import builder
    g = builder.compile().get_graph()
    mermaid = g.draw_mermaid()
    for edge in ("rewriter -.-> approval", "rewriter -.-> verifier", "approval -.-> verifier",
                 "approval -.-> rewriter", "verifier -.-> final_approval", "final_approval -.-> __end__",
                 "final_approval -.-> rewriter"):
        assert edge in mermaid, edge


def test_approval_passes_through_without_interactive():
    from tritondx.agents.approval import approval_node, final_approval_node
    state = {"config": {"interactive": False}, "candidates": [{"id": "r1c1"}], "pending": ["r1c1"],
             "best": {"id": "r1c1"}}
    assert approval_node(state, {}).goto == "verifier" and approval_node(state, {}).update is None
    assert final_approval_node(state, {}).goto == "__end__"


def test_response_types():
    from tritondx.agents.approval import edited_source, feedback_text, response_kind
    assert response_kind({"type": "ignore"}) == "reject" and response_kind({"type": "response"}) == "feedback"
    assert edited_source({"type": "edit", "args": {"action": "apply_rewrite", "args": {"source": "x"}}}) == "x"
    assert edited_source({"type": "edit", "args": {"source": "y"}}) == "y"
    assert feedback_text({"type": "feedback", "args": " more warps "}) == "more warps"
    with pytest.raises(ValueError):
        response_kind({"type": "maybe"})
