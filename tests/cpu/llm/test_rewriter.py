"""LLMRewriter.propose against a real local OpenAI-compatible server with scripted replies."""

from __future__ import annotations

import json

import pytest

from tritondx.errors import TaskFormatError
from tritondx.tools.records.evidence import Finding
from tritondx.tools.llm.rewriter import LLMRewriter, RewriteProposal
from tritondx.tools.task.spec import parse_task_source

FINDINGS = [
    Finding(id="tiny_block:axpy_kernel:13", detector="tiny_block", tier="triage", stage="source",
            kernel="axpy_kernel", severity="high", message="BLOCK=128 with num_warps=1: ~131k tiny programs",
            source_line=24, source_text="BLOCK = 128", metric={"programs": 131072, "block": 128},
            suggests=["block_size", "num_warps"]),
    Finding(id="launch_bound:-:-", detector="launch_bound", tier="profile", stage="timing", severity="low",
            message="achieved 18% of DRAM bandwidth", metric={"dram_frac": 0.18}),
]


def compile_check(source: str) -> str | None:
    """What a caller would pass: the static task check, then a Python compile."""
    try:
        parse_task_source(source, "proposal.py")
        compile(source, "proposal.py", "exec")
    except TaskFormatError as exc:
        return str(exc)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    return None


def fast_source(task_source: str) -> str:
    out = task_source.replace("BLOCK = 128", "BLOCK = 1024").replace("num_warps=1", "num_warps=4")
    assert out != task_source
    return out


def answer(source: str, ids=("tiny_block:axpy_kernel:13",), family="block_size") -> str:
    return json.dumps({"source": source, "finding_ids": list(ids), "rewrite_family": family,
                       "expected_effect": "8x fewer programs, 4 warps each: near DRAM bandwidth"})


def propose(rw: LLMRewriter, task_source: str, **kw):
    args = dict(task_source=task_source, findings=FINDINGS, history=[], feedback=None, compile_check=compile_check)
    args.update(kw)
    return rw.propose(**args)


def test_good_rewrite(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply(answer(new), prompt_tokens=321, completion_tokens=123)
    client = make_client()
    rw = LLMRewriter(client)
    p = propose(rw, task_source, history=["num_warps 1->2: 1.1x, kept"], feedback="baseline 0.41 ms")
    assert isinstance(p, RewriteProposal)
    assert p.source == new and "BLOCK = 1024" in p.source
    assert p.finding_ids == ["tiny_block:axpy_kernel:13"]
    assert p.rewrite_family == "block_size" and p.expected_effect
    assert rw.last_failure is None and rw.last_repairs == 0
    assert client.usage.calls == 1 and client.usage.attempts == 1 and client.usage.retries == 0
    assert client.usage.prompt_tokens == 321 and client.usage.completion_tokens == 123
    assert client.usage.total_tokens == 444
    # what went over the wire
    assert len(fake_openai.requests) == 1
    req = fake_openai.requests[0]
    assert req.body["model"] == "fake-model"
    roles = [m["role"] for m in req.messages]
    assert roles == ["system", "user"]
    user = req.messages[1]["content"]
    assert task_source.rstrip("\n") in user  # braces and all, verbatim
    assert "tiny_block:axpy_kernel:13" in user and "block_size, num_warps" in user
    assert "num_warps 1->2: 1.1x, kept" in user and "baseline 0.41 ms" in user
    assert "${" not in user and "$task_source" not in user


def test_fenced_json_with_prose(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply("Here is the rewrite.\n\n```json\n" + answer(new) + "\n```\nIt should be ~5x faster.")
    p = propose(LLMRewriter(make_client()), task_source)
    assert p is not None and p.source == new


def test_malformed_then_good_repairs_once(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply("Sure! I would raise BLOCK to 1024.").reply(answer(new))
    rw = LLMRewriter(make_client())
    p = propose(rw, task_source)
    assert p is not None and p.source == new
    assert rw.last_repairs == 1 and rw.last_failure is None
    assert len(fake_openai.requests) == 2
    second = fake_openai.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "Sure! I would raise BLOCK to 1024."
    assert "malformed answer" in second[3]["content"] and "no JSON object" in second[3]["content"]


def test_missing_field_is_malformed(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply(json.dumps({"source": new})).reply(answer(new))
    rw = LLMRewriter(make_client())
    assert propose(rw, task_source) is not None
    assert "rewrite_family" in fake_openai.requests[1].messages[3]["content"]


def test_malformed_twice_gives_none_with_reason(fake_openai, make_client, task_source):
    fake_openai.reply("{not json").reply('{"source": 42}')
    rw = LLMRewriter(make_client())
    assert propose(rw, task_source) is None
    assert rw.last_failure_kind == "parse"
    assert "malformed answer" in rw.last_failure and "1 repair round" in rw.last_failure
    assert len(fake_openai.requests) == 2 and rw.last_repairs == 1
    assert fake_openai.unexpected == 0


def test_non_compiling_kernel_fed_back_once(fake_openai, make_client, task_source):
    broken = fast_source(task_source).replace("def launch(x, y):", "def launch(x, y)")
    new = fast_source(task_source)
    fake_openai.reply(answer(broken)).reply(answer(new))
    rw = LLMRewriter(make_client())
    p = propose(rw, task_source)
    assert p is not None and p.source == new and rw.last_repairs == 1
    repair = fake_openai.requests[1].messages[3]["content"]
    assert "fails the task check / compile" in repair and "syntax error at line" in repair


def test_non_compiling_twice_gives_none(fake_openai, make_client, task_source):
    no_launch = fast_source(task_source).replace("def launch(x, y):", "def run(x, y):")
    fake_openai.reply(answer(no_launch)).reply(answer(no_launch))
    rw = LLMRewriter(make_client())
    assert propose(rw, task_source) is None
    assert rw.last_failure_kind == "compile" and "no launcher" in rw.last_failure
    assert len(fake_openai.requests) == 2


def test_compile_check_that_raises_is_feedback(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply(answer(new)).reply(answer(new))
    calls = []

    def flaky(source: str) -> str | None:
        calls.append(source)
        if len(calls) == 1:
            raise RuntimeError("triton: unsupported layout")
        return None

    rw = LLMRewriter(make_client())
    assert propose(rw, task_source, compile_check=flaky) is not None
    assert "RuntimeError: triton: unsupported layout" in fake_openai.requests[1].messages[3]["content"]


def test_unchanged_source_is_rejected(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    fake_openai.reply(answer(task_source)).reply(answer(new))
    rw = LLMRewriter(make_client())
    assert propose(rw, task_source).source == new
    assert "identical to the task file" in fake_openai.requests[1].messages[3]["content"]


def test_wrong_kernel_is_returned_as_is(fake_openai, make_client, task_source):
    # compiles and passes the static check, but computes alpha*x - y: the verifier's job, not ours
    wrong = fast_source(task_source).replace("alpha * x + y", "alpha * x - y")
    fake_openai.reply(answer(wrong))
    rw = LLMRewriter(make_client())
    p = propose(rw, task_source)
    assert p is not None and p.source == wrong and "alpha * x - y" in p.source
    assert len(fake_openai.requests) == 1


def test_unknown_finding_ids_are_dropped(fake_openai, make_client, task_source):
    fake_openai.reply(answer(fast_source(task_source), ids=["tiny_block:axpy_kernel:13", "made_up:1"]))
    p = propose(LLMRewriter(make_client()), task_source)
    assert p.finding_ids == ["tiny_block:axpy_kernel:13"]


def test_source_in_python_fence_next_to_json(fake_openai, make_client, task_source):
    new = fast_source(task_source)
    meta = {"finding_ids": ["tiny_block:axpy_kernel:13"], "rewrite_family": "block_size", "expected_effect": "x"}
    fake_openai.reply("```json\n" + json.dumps(meta) + "\n```\n\n```python\n" + new + "```\n")
    p = propose(LLMRewriter(make_client()), task_source)
    assert p is not None and p.source == new


def test_transport_failure_gives_none(fake_openai, make_client, task_source):
    fake_openai.error(503, "overloaded").error(503, "overloaded")
    rw = LLMRewriter(make_client(max_retries=1))
    assert propose(rw, task_source) is None
    assert rw.last_failure_kind == "transport" and "503" in rw.last_failure


def test_auth_failure_gives_none(fake_openai, make_client, task_source):
    fake_openai.error(401, "bad key")
    rw = LLMRewriter(make_client())
    assert propose(rw, task_source) is None
    assert rw.last_failure_kind == "auth" and len(fake_openai.requests) == 1


def test_summarize(fake_openai, make_client):
    fake_openai.reply("  The kernel is launch bound [tiny_block:axpy_kernel:13].\n")
    rw = LLMRewriter(make_client())
    text = rw.summarize("triage_summary", task_name="axpy_tiny_block", findings=FINDINGS,
                        task_source="def f(): return {}", roofline={"dram_frac": 0.18})
    assert text == "The kernel is launch bound [tiny_block:axpy_kernel:13]."
    msgs = fake_openai.requests[0].messages
    assert msgs[0]["role"] == "system" and "analyst of tritondx" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert "`axpy_tiny_block`" in user and "tiny_block:axpy_kernel:13" in user
    assert "(not given)" in user  # measurements were not passed
    assert "## Roofline" in user and '"dram_frac": 0.18' in user  # extra field appended


def test_try_summarize_returns_none_on_failure(fake_openai, make_client):
    fake_openai.error(400, "context too long")
    assert LLMRewriter(make_client()).try_summarize("analyst_summary", task_name="t") is None
