"""LLMConfig, prompt loading/rendering and the JSON extraction helpers."""

from __future__ import annotations

import pytest

from tritondx.tools.llm.client import extract_json_object
from tritondx.tools.llm.config import LLMConfig
from tritondx.tools.llm.prompts import list_prompts, load_prompt, placeholders, render_prompt

KEY = "sk-test-CONFIG-abcdef123456"


def test_from_env_reads_and_overrides(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TRITONDX_LLM_MODEL", "env-model")
    monkeypatch.setenv("TRITONDX_LLM_TIMEOUT_S", "7.5")
    cfg = LLMConfig.from_env()
    assert cfg.base_url == "http://127.0.0.1:9/v1" and cfg.model == "env-model" and cfg.timeout_s == 7.5
    assert cfg.api_key.get_secret_value() == KEY and cfg.configured
    cfg2 = LLMConfig.from_env(model="arg-model", api_key="sk-test-ARG-0000000000", temperature=0.0, base_url=None)
    assert cfg2.model == "arg-model" and cfg2.api_key.get_secret_value() == "sk-test-ARG-0000000000"
    assert cfg2.base_url == "http://127.0.0.1:9/v1"  # None override: env stays
    assert cfg2.temperature == 0.0


def test_from_env_defaults(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TRITONDX_LLM_MODEL", "TRITONDX_LLM_TIMEOUT_S",
                "TRITONDX_LLM_MAX_TOKENS", "TRITONDX_LLM_TEMPERATURE", "TRITONDX_LLM_MAX_RETRIES"):
        monkeypatch.delenv(var, raising=False)
    cfg = LLMConfig.from_env()
    assert cfg.model == "gpt-4o-mini" and cfg.api_key is None and cfg.base_url is None and not cfg.configured
    assert LLMConfig.from_env(env={"OPENAI_API_KEY": KEY}).configured


def test_config_never_shows_the_key():
    cfg = LLMConfig(api_key=KEY, base_url="http://127.0.0.1:9/v1")
    for text in (repr(cfg), str(cfg), cfg.model_dump_json(), str(cfg.model_dump()), f"{cfg}"):
        assert KEY not in text
    assert "**********" in repr(cfg)


def test_required_prompts_exist():
    names = set(list_prompts())
    assert {"rewriter_system", "rewriter_user", "rewriter_repair", "triage_summary", "analyst_summary",
            "summary_system"} <= names
    assert placeholders("rewriter_user") == {"task_source", "findings", "history", "feedback"}
    assert placeholders("rewriter_repair") == {"error"}
    assert placeholders("rewriter_system") == set()
    with pytest.raises(FileNotFoundError):
        load_prompt("no_such_prompt")


def test_every_prompt_renders():
    for name in list_prompts():
        out = render_prompt(name, strict=False)
        assert "${" not in out


def test_render_keeps_braces_and_dollars_verbatim():
    kernel = "def k(x):\n    d = {'a': 1}\n    s = f'{x}'\n    return '$HOME ${task_source} {findings}'\n"
    out = render_prompt("rewriter_user", task_source=kernel, findings="F", history="H", feedback="$feedback")
    assert kernel.rstrip("\n") in out and "$feedback" in out
    with pytest.raises(KeyError):
        render_prompt("rewriter_user", task_source="x")


@pytest.mark.parametrize("text", [
    '{"a": 1}',
    '```json\n{"a": 1}\n```',
    'Here:\n```\n{"a": 1}\n```\nbye',
    'Sure, the answer is {"a": 1} as requested.',
    '{"a": 1, "src": "def f():\n    return {}\n"}',  # raw newline inside a string
])
def test_extract_json_object(text):
    assert extract_json_object(text)["a"] == 1


@pytest.mark.parametrize("text,reason", [("", "empty"), ("no braces", "no JSON object"), ("{oops", "not valid JSON"),
                                         ("[1, 2]", "no JSON object")])
def test_extract_json_object_errors(text, reason):
    with pytest.raises(ValueError, match=reason):
        extract_json_object(text)
