"""LLMClient transport behaviour: retries, timeouts, non-retried errors, usage counters."""

from __future__ import annotations

import socket
import time

import pytest
from pydantic import BaseModel

from tritondx.tools.llm.client import (LLMAuthError, LLMClient, LLMError, LLMParseError, LLMRequestError,
                                       LLMTransportError)
from tritondx.tools.llm.config import LLMConfig


def test_plain_completion_counts_tokens(fake_openai, make_client):
    fake_openai.reply("hello", prompt_tokens=11, completion_tokens=7).reply("again", prompt_tokens=5,
                                                                             completion_tokens=3)
    client = make_client(temperature=0.0, max_tokens=256)
    reply = client.chat([("system", "be brief"), ("user", "hi")])
    assert reply.content == "hello" and reply.finish_reason == "stop" and reply.attempts == 1
    assert client.complete("s", "u") == "again"
    u = client.usage
    assert (u.calls, u.attempts, u.retries, u.failures) == (2, 2, 0, 0)
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (16, 10, 26)
    body = fake_openai.requests[0].body
    assert body["temperature"] == 0.0
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 256
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_429_then_success_is_retried(fake_openai, make_client):
    fake_openai.error(429, "slow down", headers={"Retry-After": "0.01"}).reply("ok")
    client = make_client()
    assert client.chat([("user", "hi")]).content == "ok"
    assert (client.usage.calls, client.usage.attempts, client.usage.retries) == (1, 2, 1)
    assert len(fake_openai.requests) == 2


def test_retry_after_is_capped(fake_openai, make_client):
    fake_openai.error(429, "slow down", headers={"Retry-After": "30"}).reply("ok")
    client = make_client(retry_wait_max_s=0.1)
    t0 = time.monotonic()
    assert client.chat([("user", "hi")]).content == "ok"
    assert time.monotonic() - t0 < 3.0


def test_500_then_success_is_retried(fake_openai, make_client):
    fake_openai.error(500, "boom").error(502, "bad gateway").reply("ok")
    client = make_client(max_retries=2)
    assert client.chat([("user", "hi")]).content == "ok"
    assert (client.usage.calls, client.usage.attempts, client.usage.retries) == (1, 3, 2)


def test_timeout_then_success_is_retried(fake_openai, make_client):
    fake_openai.reply("too late", delay_s=1.5).reply("ok")
    client = make_client(timeout_s=0.5)
    t0 = time.monotonic()
    reply = client.chat([("user", "hi")])
    assert reply.content == "ok" and reply.attempts == 2
    assert client.usage.retries == 1 and client.usage.calls == 1
    assert time.monotonic() - t0 < 1.4  # did not wait for the slow reply


def test_retries_exhausted_raise_transport_error(fake_openai, make_client):
    for _ in range(3):
        fake_openai.error(503, "overloaded")
    client = make_client(max_retries=2)
    with pytest.raises(LLMTransportError) as ei:
        client.chat([("user", "hi")])
    err = ei.value
    assert err.status_code == 503 and err.attempts == 3 and "503" in str(err) and "overloaded" in str(err)
    assert err.__cause__ is None and err.__context__ is None
    assert (client.usage.calls, client.usage.attempts, client.usage.retries, client.usage.failures) == (0, 3, 2, 1)


def test_401_is_not_retried(fake_openai, make_client):
    fake_openai.error(401, "invalid api key").reply("never sent")
    client = make_client(max_retries=3)
    with pytest.raises(LLMAuthError) as ei:
        client.chat([("user", "hi")])
    assert ei.value.status_code == 401 and ei.value.kind == "auth"
    assert len(fake_openai.requests) == 1
    assert (client.usage.attempts, client.usage.retries, client.usage.failures) == (1, 0, 1)


def test_400_is_not_retried(fake_openai, make_client):
    fake_openai.error(400, "maximum context length exceeded").reply("never sent")
    client = make_client(max_retries=3)
    with pytest.raises(LLMRequestError) as ei:
        client.chat([("user", "hi")])
    assert ei.value.status_code == 400 and len(fake_openai.requests) == 1


def test_connection_refused_is_retried_then_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-nothing-here",
                                 timeout_s=1.0, max_retries=1, retry_wait_s=0.01))
    with pytest.raises(LLMTransportError) as ei:
        client.chat([("user", "hi")])
    assert "connection error" in str(ei.value)
    assert client.usage.attempts == 2 and client.usage.retries == 1


class Answer(BaseModel):
    value: int


def test_chat_model_parses_or_raises_parse_error(fake_openai, make_client):
    fake_openai.reply('```json\n{"value": 3}\n```').reply('{"value": "x"}').reply('{"value": ', finish_reason="length")
    client = make_client()
    obj, reply = client.chat_model([("user", "3?")], Answer)
    assert obj.value == 3 and reply.prompt_tokens == 100
    with pytest.raises(LLMParseError) as ei:
        client.chat_model([("user", "3?")], Answer)
    assert "value" in str(ei.value) and ei.value.reply == '{"value": "x"}'
    with pytest.raises(LLMParseError) as ei:
        client.chat_model([("user", "3?")], Answer)
    assert "cut off" in str(ei.value) and isinstance(ei.value, LLMError)


def test_no_key_and_no_base_url_is_a_config_error():
    from tritondx.tools.llm.client import LLMConfigError

    with pytest.raises(LLMConfigError):
        LLMClient(LLMConfig(api_key=None, base_url=None))


def test_local_server_without_key(fake_openai):
    fake_openai.reply("ok")
    client = LLMClient(LLMConfig(base_url=fake_openai.base_url, retry_wait_s=0.01))
    assert client.complete("s", "u") == "ok"
    assert fake_openai.requests[0].headers["Authorization"] == "Bearer EMPTY"
