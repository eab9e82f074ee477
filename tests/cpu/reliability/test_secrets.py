"""Secrets: `tritondx optimize --llm` with a recognisable OPENAI_API_KEY against a loopback
chat-completions server that answers badly (a 500 whose body echoes the key, replies that quote the
key, replies that are not a proposal), so the LLM path runs, retries, repairs and falls back to the
offline expert. Afterwards every byte of every file in the run folder (checkpoints.sqlite and its WAL,
log.jsonl, run.json, report.*, candidate files, IR artifacts) and the captured stdout/stderr are
searched for the key: it is nowhere. The server did receive it (the key was used, only never shown).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from tdx_rel import TASK, Case, base_env, run_cli

KEY = f"sk-reliability-{uuid.uuid4().hex}"
PROXY_PW = f"proxy-pw-{uuid.uuid4().hex[:12]}"


def _server():
    from pytest_httpserver import HTTPServer
    from werkzeug import Request, Response

    seen: list[dict] = []
    lock = threading.Lock()
    replies = [
        # a gateway error that echoes the credentials it got
        (500, {"error": {"message": f"upstream rejected Authorization: Bearer {KEY}"}}),
        # a reply that quotes the key and is not a proposal
        (200, f"Sure! I used your key {KEY} (proxy password {PROXY_PW}); here is no JSON at all."),
        # JSON of the wrong shape, quoting the key again
        (200, json.dumps({"source": "", "finding_ids": ["nope"], "note": f"api_key={KEY}"})),
        (200, "```python\ndef launch(:\n```"),
    ]

    def handle(request: Request) -> Response:
        with lock:
            seen.append({"auth": request.headers.get("Authorization", ""), "body": request.get_data(as_text=True)})
            status, content = replies[(len(seen) - 1) % len(replies)]
        if status != 200:
            return Response(json.dumps(content), status=status, content_type="application/json")
        payload = {"id": "chatcmpl-rel", "object": "chat.completion", "created": int(time.time()), "model": "fake",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        return Response(json.dumps(payload), status=200, content_type="application/json")

    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handle)
    server.start()
    return server, seen


def _llm_run(tmp: Path):
    server, seen = _server()
    try:
        env = base_env(tmp, OPENAI_API_KEY=KEY, HTTPS_PROXY=f"http://user:{PROXY_PW}@proxy.invalid:3128",
                       NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
                       TRITONDX_LLM_MAX_RETRIES="1", TRITONDX_LLM_TIMEOUT_S="20", TRITONDX_CANDIDATES_PER_ROUND="1")
        r = run_cli("optimize", str(TASK), "--backend", "interpreter", "--out", str(tmp / "run"), "--max-rounds", "1",
                    "--all-tiers", "--llm", "--llm-base-url", server.url_for("/v1"), "--llm-model", "fake-model",
                    tmp=tmp, env=env, timeout=600)
    finally:
        server.clear()
        server.stop()
    return r, seen, tmp / "run"


LLM_RUN = Case("secrets-llm-run", _llm_run, cost=60)


@pytest.mark.parametrize("rcase", [LLM_RUN], ids=["llm-run"])
def test_api_key_appears_in_no_artifact(rcase, rel_outcomes):
    r, seen, run_dir = rel_outcomes[rcase.id].result()
    assert r.returncode == 0, r.stderr[-3000:]
    # the LLM path ran, with the key, and fell back to the expert
    assert seen and all(s["auth"] == f"Bearer {KEY}" for s in seen)
    report = json.loads((run_dir / "report.json").read_text())
    assert (report.get("llm_usage") or {}).get("fallbacks", 0) >= 1
    assert report["candidates"] and all(not c["family"].startswith("llm") for c in report["candidates"])
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"checkpoints.sqlite", "log.jsonl", "report.json", "report.md", "run.json"} <= names
    assert any(p.parent.name == "candidates" for p in files)
    assert any(p.suffix in (".ttir", ".ttgir", ".ptx", ".llir") for p in files), "no IR artifact to search"
    needles = {KEY.encode(), KEY[len("sk-reliability-"):].encode(), PROXY_PW.encode()}
    for p in files:
        data = p.read_bytes()
        for n in needles:
            assert n not in data, f"{p.relative_to(run_dir)} holds a secret"
    for stream in (r.stdout, r.stderr):
        for n in needles:
            assert n.decode() not in stream
    # the redaction did have something to do: the server's echo reached the log, masked
    log = (run_dir / "log.jsonl").read_text()
    assert "***" in log
