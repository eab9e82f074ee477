"""langgraph.json: the graph (approvals included) is served by `langgraph dev` on loopback."""

import json
import os
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


@pytest.mark.slow
def test_langgraph_dev_serves_the_graph(tmp_path):
    exe = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
    if not Path(exe).exists():
        pytest.skip("langgraph-cli[inmem] is not installed (the `studio` and `test` extras bring it)")
    port = _free_port()
    state_dir = ROOT / ".langgraph_api"  # `langgraph dev` keeps its in-memory runtime's files in the cwd
    had_state = state_dir.exists()
    env = {**os.environ, "LANGGRAPH_NO_VERSION_CHECK": "1", "LANGSMITH_TRACING": "false"}
    log = open(tmp_path / "dev.log", "w")
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
        assert ok == {"ok": True, "services": {}} or (ok and ok.get("ok")), (tmp_path / "dev.log").read_text()[-3000:]
        (assistant,) = [a for a in _get(f"{base}/assistants/search", {}) if a["graph_id"] == "tritondx"]
        drawn = _get(f"{base}/assistants/{assistant['assistant_id']}/graph")
        nodes = {n["id"] for n in drawn["nodes"]}
        assert {"triage", "rewriter", "approval", "verifier", "final_approval"} <= nodes
        edges = {(e["source"], e["target"]) for e in drawn["edges"]}
        assert ("rewriter", "approval") in edges and ("verifier", "final_approval") in edges
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server we started, and its workers
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        if not had_state:
            shutil.rmtree(state_dir, ignore_errors=True)
