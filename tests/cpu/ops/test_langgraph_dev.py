"""langgraph.json: the graph (approvals included) is served by `langgraph dev` on loopback, and a run
started through the LangGraph API (what Studio does) pauses at each approval and is resumed through it."""

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_langgraph_json_names_the_module_level_graph():
    conf = json.loads((ROOT / "langgraph.json").read_text())
    assert conf["dependencies"] == ["."]
    path, attr = conf["graphs"]["tritondx"].split(":")
    assert (ROOT / path).resolve() == ROOT / "graph.py" and attr == "builder"
    from tritondx import graph
    assert {"approval", "final_approval", "rewriter", "verifier"} <= set(getattr(graph, attr).nodes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, data: dict | None = None):
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _wait_group_gone(pgid: int, timeout: float = 20) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)  # only the group this test started
    except ProcessLookupError:
        pass
    time.sleep(0.5)


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    """`langgraph dev` on a free loopback port (the in-memory runtime), run folders under a temporary
    $TRITONDX_RUNS; yields (base URL, runs folder); stops the server and its workers at the end."""
    exe = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
    if not Path(exe).exists():
        pytest.skip("langgraph-cli[inmem] is not installed (the `studio` and `test` extras bring it)")
    if importlib.util.find_spec("langgraph_runtime_inmem") is None:  # not imported: that writes .langgraph_api
        pytest.skip("langgraph-cli without [inmem]: `langgraph dev` cannot run")
    tmp = tmp_path_factory.mktemp("langgraph_dev")
    port = _free_port()
    state_dir = ROOT / ".langgraph_api"  # `langgraph dev` keeps its in-memory runtime's files in the cwd
    had_state = state_dir.exists()
    env = {**os.environ, "LANGGRAPH_NO_VERSION_CHECK": "1", "LANGSMITH_TRACING": "false",
           "TRITONDX_RUNS": str(tmp / "runs")}
    env.pop("TRITONDX_CHECKPOINT_URL", None)
    log_path = tmp / "dev.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([exe, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
                             "--config", str(ROOT / "langgraph.json")], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        ok = None
        while time.time() < deadline and proc.poll() is None:
            try:
                ok = _get(f"{base}/ok")
                break
            except OSError:
                time.sleep(0.5)
        assert ok == {"ok": True, "services": {}} or (ok and ok.get("ok")), log_path.read_text()[-3000:]
        yield base, tmp / "runs", log_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server we started, and its workers
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        _wait_group_gone(proc.pid)  # its workers write .langgraph_api on the way out: let them finish first
        log.close()
        if not had_state:
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.mark.slow
def test_langgraph_dev_serves_the_graph(dev_server):
    base, _, log_path = dev_server
    (assistant,) = [a for a in _get(f"{base}/assistants/search", {}) if a["graph_id"] == "tritondx"]
    drawn = _get(f"{base}/assistants/{assistant['assistant_id']}/graph")
    nodes = {n["id"] for n in drawn["nodes"]}
    assert {"triage", "rewriter", "approval", "verifier", "bench", "select", "final_approval", "report"} <= nodes
    edges = {(e["source"], e["target"]) for e in drawn["edges"]}
    assert ("rewriter", "approval") in edges and ("select", "final_approval") in edges


def _waiting(client, thread_id: str) -> list[dict]:
    """The approval requests the thread is paused on, read from the thread state (as Studio does)."""
    state = client.threads.get_state(thread_id)
    return [i["value"][0] if isinstance(i["value"], list) else i["value"] for i in state.get("interrupts") or []]


@pytest.mark.slow
def test_langgraph_api_run_with_approvals(dev_server):
    """A run of assistant `tritondx` through the LangGraph API, given only a task path and a config: it pauses
    at each candidate's approval (evidence + diff in the interrupt), is resumed with accept / reject / edit
    through `command: {"resume": [...]}`, pauses at the final approval, and ends done with a verified best."""
    from langgraph_sdk import get_sync_client  # a dependency of langgraph itself

    base, runs, log_path = dev_server
    client = get_sync_client(url=base, api_key=None)
    thread_id = client.threads.create()["thread_id"]
    task = ROOT / "tests" / "cpu" / "verifier" / "tiny_axpy.py"
    config = {"backend": "interpreter", "interactive": True, "max_rounds": 1, "candidates_per_round": 3}
    context = {"config": config}   # the run's settings: LangGraph's runtime context, given with every run
    client.runs.wait(thread_id, "tritondx", input={"task_path": str(task)}, context=context)
    assert client.threads.get(thread_id)["status"] == "interrupted", log_path.read_text()[-3000:]

    # the first request: candidate r1c1 with the finding that motivated it (source line) and its diff
    (req,) = _waiting(client, thread_id)
    assert req["kind"] == "candidate" and req["allowed"] == ["accept", "reject", "edit", "feedback"]
    args = req["action_request"]["args"]
    assert req["action_request"]["action"] == "apply_rewrite" and args["candidate"] == "r1c1"
    assert {"tiny_block", "few_warps"} <= {f["detector"] for f in req["evidence"]}
    assert any(f["source_line"] == 31 and "BLOCK=BLOCK" in f["source_text"] for f in req["evidence"])
    assert "-    BLOCK = 128" in req["diff"] and "+    BLOCK = 1024" in req["diff"]
    assert "Evidence:" in req["description"] and "current best" in req["diff"]
    # the run folder was made by the triage node, under $TRITONDX_RUNS
    run_dir = Path(client.threads.get_state(thread_id)["values"]["run_dir"])
    assert run_dir.parent == runs and (run_dir / "task_initial.py").read_text() == task.read_text()
    assert Path(args["path"]).parent == run_dir / "candidates"

    client.runs.wait(thread_id, "tritondx", command={"resume": [{"type": "accept", "args": None}]}, context=context)
    (req,) = _waiting(client, thread_id)
    assert req["action_request"]["args"]["candidate"] == "r1c2"
    client.runs.wait(thread_id, "tritondx", command={"resume": [{"type": "reject", "args": None}]}, context=context)
    (req,) = _waiting(client, thread_id)
    assert req["action_request"]["args"]["candidate"] == "r1c3"
    source = req["action_request"]["args"]["source"]
    edited = re.sub(r"^(\s+BLOCK = )\d+$", r"\g<1>512", source, count=1, flags=re.M)
    assert edited != source
    client.runs.wait(thread_id, "tritondx", command={"resume": [{"type": "edit", "args": {"source": edited}}]}, context=context)

    # the verifier stopped (max_rounds 1): the final approval names the best kernel and its diff to the initial one
    (req,) = _waiting(client, thread_id)
    assert client.threads.get(thread_id)["status"] == "interrupted"
    assert req["kind"] == "final" and req["action_request"]["action"] == "accept_best"
    best_id = req["action_request"]["args"]["candidate"]
    assert best_id in ("r1c1", "r1c3") and "-    BLOCK = 128" in req["diff"]
    client.runs.wait(thread_id, "tritondx", command={"resume": [{"type": "accept", "args": None}]}, context=context)

    assert client.threads.get(thread_id)["status"] == "idle" and _waiting(client, thread_id) == []
    state = client.threads.get_state(thread_id)
    assert state["next"] == []
    values = state["values"]
    assert values["status"] == "done" and values["best"]["id"] == best_id
    ver = {v["id"]: v for v in values["verifications"]}
    assert ver[best_id]["passed"] is True and ver["r1c1"]["passed"] is True and ver["r1c3"]["passed"] is True
    assert ver["r1c2"]["klass"] == "rejected_by_human"
    cands = {c["id"]: c for c in values["candidates"]}
    assert cands["r1c3"]["path"].endswith(".edited.py") and "BLOCK = 512" in Path(cands["r1c3"]["path"]).read_text()
    human = [(d["node"], d["decision"], d.get("candidate")) for d in values["decisions"]
             if d["node"] in ("approval", "final_approval")]
    assert human == [("approval", "accept", "r1c1"), ("approval", "reject", "r1c2"), ("approval", "edit", "r1c3"),
                     ("final_approval", "accept", best_id)]
    # the run wrote its report files from inside the graph (no runner around it): the accepted best is the
    # optimized task, and the report names it
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "done" and report["best"]["id"] == best_id, report["best"]
    assert (run_dir / "optimized_task.py").read_text() == Path(cands[best_id]["path"]).read_text()
    assert (run_dir / "report.md").exists() and (run_dir / "report.html").exists()
