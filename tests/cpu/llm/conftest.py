"""A real OpenAI-compatible chat-completions server on 127.0.0.1 with scripted replies.

No mocking: the client under test speaks HTTP to this server through langchain-openai and openai.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from tritondx.tools.llm.client import LLMClient
from tritondx.tools.llm.config import LLMConfig

REPO = Path(__file__).resolve().parents[3]
SECRET = "sk-test-SECRET-1234567890"
_ids = itertools.count(1)


@dataclass
class Step:
    status: int = 200
    content: str | None = None
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 50
    finish_reason: str = "stop"


@dataclass
class Seen:
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])


class FakeOpenAI:
    """Scripted replies for POST /v1/chat/completions; records every request it sees."""

    def __init__(self, server: HTTPServer):
        self.server = server
        self.script: deque[Step] = deque()
        self.requests: list[Seen] = []
        self.unexpected = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.server.url_for("/v1")

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.unexpected = 0

    # scripting
    def reply(self, content: str, **kw: Any) -> "FakeOpenAI":
        self.script.append(Step(content=content, **kw))
        return self

    def error(self, status: int, message: str = "error", headers: dict[str, str] | None = None,
              **kw: Any) -> "FakeOpenAI":
        body = {"error": {"message": message, "type": "error", "param": None, "code": None}}
        self.script.append(Step(status=status, body=body, headers=headers or {}, **kw))
        return self

    # serving
    def handle(self, request: Request) -> Response:
        try:
            body = json.loads(request.get_data(as_text=True) or "{}")
        except ValueError:
            body = {"_raw": request.get_data(as_text=True)}
        with self._lock:
            self.requests.append(Seen(headers=dict(request.headers), body=body))
            step = self.script.popleft() if self.script else None
            if step is None:
                self.unexpected += 1
        if step is None:
            return Response(json.dumps({"error": {"message": "script exhausted"}}), status=418,
                            content_type="application/json")
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.status != 200:
            return Response(json.dumps(step.body), status=step.status, headers=step.headers,
                            content_type="application/json")
        payload = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": step.content},
                         "finish_reason": step.finish_reason}],
            "usage": {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                      "total_tokens": step.prompt_tokens + step.completion_tokens},
        }
        return Response(json.dumps(payload), status=200, headers=step.headers, content_type="application/json")


@pytest.fixture(scope="session")
def _server():
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    fake = FakeOpenAI(server)
    server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(fake.handle)
    yield fake
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def fake_openai(_server: FakeOpenAI):
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture
def make_client(fake_openai: FakeOpenAI):
    def make(**overrides: Any) -> LLMClient:
        kw: dict[str, Any] = dict(base_url=fake_openai.base_url, api_key=SECRET, model="fake-model",
                                  timeout_s=5.0, max_retries=2, retry_wait_s=0.01, retry_wait_max_s=0.05)
        kw.update(overrides)
        return LLMClient(LLMConfig(**kw))

    return make


@pytest.fixture(scope="session")
def task_source() -> str:
    return (REPO / "examples" / "add_tiny_block.py").read_text()
