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


def _permissive_saver(tmp_path, url):
    """A saver that writes anything (as a tampered or foreign database would hold)."""
    serde = JsonPlusSerializer(allowed_msgpack_modules=True)
    if url is None:
        return SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False), serde=serde)
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    saver = PostgresSaver(psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row),
                          serde=serde)
    saver.setup()
    return saver


def test_a_checkpoint_with_a_foreign_type_fails_to_load(tmp_path, store):
    # written by a permissive saver (as a tampered or foreign database would be) ...
    permissive = _permissive_saver(tmp_path, store)
    cfg = {"configurable": {"thread_id": "t"}}
    _toy(permissive, {"path": Path("/tmp/x")}).invoke({"items": []}, cfg)
    ok_dir = tmp_path / "ok"
    ok_dir.mkdir()
    plain = open_checkpointer(ok_dir, store)
    ok_cfg = {"configurable": {"thread_id": "ok"}}
    _toy(plain, {"path": "/tmp/x"}).invoke({"items": []}, ok_cfg)
    assert _toy(plain, None).get_state(ok_cfg).values["extra"] == {"path": "/tmp/x"}
    # ... and read back through the project's saver: refused, not rebuilt
    strict = open_checkpointer(tmp_path, store)
    with pytest.raises(DisallowedCheckpointType, match="pathlib"):
        _toy(strict, None).get_state(cfg)
    for s in (permissive, plain, strict):
        s.conn.close()


def test_runner_uses_the_strict_serializer(tmp_path, store, monkeypatch):
    from tritondx.runner import open_checkpointer as runner_open
    if store:
        monkeypatch.setenv("TRITONDX_CHECKPOINT_URL", store)
    saver = runner_open(tmp_path)
    try:
        assert isinstance(saver.serde, StrictSerializer)
        assert type(saver).__name__ == ("PostgresSaver" if store else "PatientSqliteSaver")
    finally:
        saver.conn.close()
    # the run folder records where its checkpoints are, without the password
    marker = tmp_path / "checkpoints.json"
    assert marker.exists() == bool(store)
    if store:
        from urllib.parse import urlsplit
        assert urlsplit(store).password not in marker.read_text()
        assert "127.0.0.1" in marker.read_text()


def test_graph_with_approvals_is_drawable():
    from tritondx.graph import builder
    g = builder.compile().get_graph()
    mermaid = g.draw_mermaid()
    for edge in ("rewriter -.-> approval", "rewriter -.-> verifier", "rewriter -.-> tuner", "approval -.-> verifier",
                 "approval -.-> rewriter", "select -.-> final_approval", "final_approval -.-> report", "report --> __end__",
                 "verifier -.-> bench", "verifier -.-> select", "bench -.-> select",
                 "final_approval -.-> rewriter"):
        assert edge in mermaid, edge


def test_approval_passes_through_without_interactive():
    from tritondx.agents.approval import approval_node, final_approval_node
    from tritondx.agents.common import runtime_for
    from tritondx.config import RunConfig
    state = {"candidates": [{"id": "r1c1"}], "pending": ["r1c1"], "best": {"id": "r1c1"}}
    rt = runtime_for(RunConfig(interactive=False))
    assert approval_node(state, {}, rt).goto == "verifier" and approval_node(state, {}, rt).update is None
    assert final_approval_node(state, {}, rt).goto == "report"


def test_response_types():
    from tritondx.agents.approval import edited_source, feedback_text, response_kind
    assert response_kind({"type": "ignore"}) == "reject" and response_kind({"type": "response"}) == "feedback"
    assert edited_source({"type": "edit", "args": {"action": "apply_rewrite", "args": {"source": "x"}}}) == "x"
    assert edited_source({"type": "edit", "args": {"source": "y"}}) == "y"
    assert feedback_text({"type": "feedback", "args": " more warps "}) == "more warps"
    with pytest.raises(ValueError):
        response_kind({"type": "maybe"})


def test_store_url_rules(tmp_path, monkeypatch):
    from tritondx.checkpoints import redact_url, store_url, strip_password, thread_id_for
    from tritondx.errors import TritonDXError
    monkeypatch.delenv("TRITONDX_CHECKPOINT_URL", raising=False)
    url = "postgresql://tdx:hunter2-secret@db.example:5433/ckpt?sslmode=disable"
    assert redact_url(url) == "postgresql://tdx:***@db.example:5433/ckpt?sslmode=disable"
    assert strip_password(url) == "postgresql://tdx@db.example:5433/ckpt?sslmode=disable"
    assert "hunter2" not in redact_url("postgresql://tdx@h/d?password=hunter2-secret")
    new, old_sqlite, old_pg = (tmp_path / n for n in ("new", "old_sqlite", "old_pg"))
    for d in (new, old_sqlite, old_pg):
        d.mkdir()
    (old_sqlite / "checkpoints.sqlite").write_bytes(b"")
    (old_pg / "checkpoints.json").write_text('{"store": "postgres", "url": "postgresql://tdx@db.example:5433/ckpt"}')
    assert store_url(new) is None and thread_id_for(new) == "new"  # default: SQLite in the folder
    assert store_url(new, url) == url  # a new run goes where the URL says
    assert thread_id_for(new, url).startswith("new-") and thread_id_for(new, url) != thread_id_for(new, url)
    assert store_url(old_sqlite, url) is None  # an existing run keeps its own store
    assert store_url(old_pg) == "postgresql://tdx@db.example:5433/ckpt"  # no password: libpq finds it
    assert store_url(old_pg, url) == url
    monkeypatch.setenv("TRITONDX_CHECKPOINT_URL", url)
    assert store_url(new) == url
    with pytest.raises(TritonDXError, match="checkpoints are in postgresql://tdx@db.example:5433/ckpt") as e:
        store_url(old_pg, "postgresql://tdx:hunter2-secret@other:5432/x")
    assert "hunter2" not in str(e.value)
    with pytest.raises(TritonDXError, match="expected postgresql://"):
        store_url(new, "mysql://u:hunter2-secret@h/d")


def test_unreachable_database_error_is_one_redacted_line(tmp_path):
    pytest.importorskip("psycopg")
    from tritondx.errors import TritonDXError
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    url = f"postgresql://tdx:hunter2-secret@127.0.0.1:{port}/x"
    with pytest.raises(TritonDXError, match="cannot connect") as e:
        open_checkpointer(tmp_path, url)
    assert "hunter2" not in str(e.value) and "tdx:***@127.0.0.1" in str(e.value)


def test_batch_sees_an_interrupted_run_in_either_store(tmp_path, store):
    import json

    from tritondx.batch_task import _earlier_run
    from tritondx.checkpoints import count_checkpoints, thread_id_for
    run = tmp_path / "runs" / "task_a"
    run.mkdir(parents=True)
    assert _earlier_run(run, store) is None  # nothing there: start over
    thread = thread_id_for(run, store)
    (run / "run.json").write_text(json.dumps({"thread_id": thread}))
    saver = open_checkpointer(run, store)
    _toy(saver, "x").invoke({"items": []}, {"configurable": {"thread_id": thread}})
    saver.conn.close()
    assert (run / "checkpoints.json").exists() == bool(store)
    assert count_checkpoints(run, store) >= 2
    assert _earlier_run(run, store) == "interrupted"  # the batch resumes it
    other = tmp_path / "runs2" / "task_a"  # same folder name in another batch, same database
    other.mkdir(parents=True)
    (other / "run.json").write_text(json.dumps({"thread_id": thread_id_for(other, store)}))
    open_checkpointer(other, store).conn.close()
    assert not count_checkpoints(other, store) and _earlier_run(other, store) is None
    (run / "report.json").write_text("{}")
    assert _earlier_run(run, store) == "finished"
    if store:  # the database cannot be reached: never wiped, resumed (which then says why it fails)
        (run / "report.json").unlink()
        (run / "checkpoints.json").write_text(json.dumps({"store": "postgres",
                                                          "url": "postgresql://tdx@127.0.0.1:1/gone"}))
        assert count_checkpoints(run) is None and _earlier_run(run) == "interrupted"
