"""The API key is sent to the server, and shows up nowhere else: logs, exceptions, reprs."""

from __future__ import annotations

import io
import json
import logging
import traceback

import pytest
import structlog

from tritondx.tools.records.evidence import Finding
from tritondx.tools.llm.client import LLMAuthError
from tritondx.tools.llm.redact import RedactingFilter, redact_secrets, redact_text, register_secret
from tritondx.tools.llm.rewriter import LLMRewriter

SECRET = "sk-test-SECRET-1234567890"  # the same key the conftest clients use

FINDING = Finding(id="tiny_block:axpy_kernel:13", detector="tiny_block", tier="triage", stage="source",
                  kernel="axpy_kernel", message="BLOCK=128", suggests=["block_size"])


@pytest.fixture
def structlog_buffer():
    buf = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.format_exc_info,
                    redact_secrets, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(file=buf),
        cache_logger_on_first_use=False,
    )
    yield buf
    structlog.reset_defaults()


def test_key_is_used_but_never_shown(fake_openai, make_client, task_source, structlog_buffer, caplog):
    caplog.set_level(logging.DEBUG)
    new = task_source.replace("BLOCK = 128", "BLOCK = 1024")
    answer = json.dumps({"source": new, "finding_ids": [FINDING.id], "rewrite_family": "block_size",
                         "expected_effect": "fewer, fuller programs"})
    # the server echoes the key in its error bodies, as some gateways do
    fake_openai.error(500, f"upstream rejected Authorization: Bearer {SECRET}").reply(answer)
    client = make_client(api_key=SECRET)
    rw = LLMRewriter(client)
    with structlog.testing.capture_logs() as raw_events:  # no redaction processor here: our own text is clean
        proposal = rw.propose(task_source, [FINDING], [], None, lambda s: None)
    assert proposal is not None and proposal.source == new
    assert client.usage.retries == 1
    assert raw_events and any(e["event"] == "llm.retry" for e in raw_events)

    fake_openai.error(401, f"Incorrect API key provided: {SECRET}")
    with pytest.raises(LLMAuthError) as ei:
        client.chat([("user", "hi")])
    err = ei.value
    fake_openai.error(401, f"Incorrect API key provided: {SECRET}")
    assert rw.propose(task_source, [FINDING], [], None, lambda s: None) is None

    # the key did travel: every request carried it
    assert fake_openai.requests
    for req in fake_openai.requests:
        assert req.headers.get("Authorization") == f"Bearer {SECRET}"

    # openai / httpx debug logging does not print the key on its own
    assert caplog.records and SECRET not in caplog.text

    # an explicit attempt to log it is masked by the processor / the stdlib filter
    structlog.get_logger("test").info("oops", api_key=SECRET, headers={"Authorization": f"Bearer {SECRET}"},
                                      nested=[{"k": f"key={SECRET}"}], err=err)
    logging.getLogger("openai").debug("headers: Authorization: Bearer %s", SECRET)

    texts = {
        "structlog": structlog_buffer.getvalue(),
        "raw structlog events": repr(raw_events),
        "stdlib logs": "\n".join(RedactingFilter().filter(r) and r.getMessage() for r in caplog.records),
        "error str": str(err),
        "error repr": repr(err),
        "error traceback": "".join(traceback.format_exception(err)),
        "rewriter failure": rw.last_failure or "",
        "proposal repr": repr(proposal),
        "proposal json": proposal.model_dump_json(),
        "usage repr": repr(client.usage),
        "client repr": repr(client),
        "rewriter repr": repr(rw),
        "config repr": repr(client.config) + str(client.config) + client.config.model_dump_json(),
    }
    assert "llm.failed" in texts["structlog"] and "oops" in texts["structlog"]
    assert "***" in texts["structlog"] and "***" in texts["stdlib logs"]
    assert "Incorrect API key provided" in texts["error str"] and err.status_code == 401
    assert rw.last_failure_kind == "auth"
    for where, text in texts.items():
        assert SECRET not in text, f"key leaked in {where}"
        assert "SECRET-1234567890" not in text, f"key fragment leaked in {where}"


def test_redact_text_patterns():
    register_secret("hunter2-correct-horse")
    register_secret("abc")  # too short: ignored, ordinary words stay
    text = ("pw=hunter2-correct-horse; Authorization: Bearer eyJhbGciOi.xyz; key sk-proj-AbCdEf012345; "
            '"api_key": "zzzzzzzzzz"; abc stays')
    out = redact_text(text)
    for leaked in ("hunter2-correct-horse", "eyJhbGciOi", "sk-proj-AbCdEf012345", "zzzzzzzzzz"):
        assert leaked not in out
    assert "Bearer ***" in out and "abc stays" in out


def test_redact_processor_walks_nested_values():
    register_secret("hunter2-correct-horse")

    class Leaky:
        def __str__(self):
            return "token hunter2-correct-horse"

    ev = redact_secrets(None, "info", {"event": "x", "n": 3, "d": {"h": ("hunter2-correct-horse", 1)},
                                       "obj": Leaky(), "ok": None})
    assert ev["d"] == {"h": ("***", 1)} and ev["obj"] == "token ***" and ev["n"] == 3 and ev["ok"] is None
