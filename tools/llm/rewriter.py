"""The LLM rewriter: task source + findings in, a ``RewriteProposal`` (a complete new task file) out.

``LLMRewriter.propose`` builds the prompt from ``prompts/rewriter_*.md``, calls the model, parses the
JSON reply, and runs the caller's ``compile_check(source) -> None | error``. A malformed reply or a
failing check is fed back once (``rewriter_repair.md``); if the second answer is bad too, or the
endpoint is unavailable, it returns ``None`` and says why in ``last_failure`` / ``last_failure_kind``
(the caller's offline expert takes over). Correctness is not judged here: the verifier does that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field, field_validator

from tritondx.tools.records.evidence import Finding
from tritondx.tools.llm.client import ChatReply, LLMClient, LLMError, Message, extract_json_object
from tritondx.tools.llm.prompts import load_prompt, render_prompt

log = structlog.get_logger("tritondx.llm.rewriter")

CompileCheck = Callable[[str], "str | None"]
FailureKind = Literal["parse", "compile", "unchanged", "transport", "auth", "request", "config", "error"]

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
_PY_FENCE_RE = re.compile(r"```[ \t]*(?:python|py)[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)
_WHOLE_FENCE_RE = re.compile(r"^\s*```[ \t]*(?:python|py)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```\s*$", re.DOTALL)


class RewriteProposal(BaseModel):
    """What the model proposes: the complete new task file and why."""

    source: str = Field(min_length=1, description="the complete new task file")
    finding_ids: list[str] = Field(default_factory=list, description="ids of the findings it acts on")
    rewrite_family: str = Field(min_length=1, description="rewrite family id, e.g. 'block_size'")
    expected_effect: str = Field(default="", description="what gets faster and why")

    @field_validator("source")
    @classmethod
    def _unfence(cls, v: str) -> str:
        m = _WHOLE_FENCE_RE.match(v)
        v = m.group(1) if m else v
        if not v.strip():
            raise ValueError("source is empty")
        return v if v.endswith("\n") else v + "\n"

    @field_validator("finding_ids", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [v]
        return v


# ------------------------------------------------------------------------------------ formatting


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_findings(findings: Sequence[Finding], limit: int = 40) -> str:
    """Findings as a Markdown list for the prompt, highest severity first (stable)."""
    if not findings:
        return "(no findings: look for the usual causes yourself, e.g. tiny blocks, missing tl.dot, extra passes)"
    ordered = sorted(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 9))
    lines = []
    for f in ordered[:limit]:
        where = f"kernel `{f.kernel}`" if f.kernel else "task"
        if f.source_line is not None:
            where += f", line {f.source_line}"
        lines.append(f"- id `{f.id}` ({f.severity}; detector `{f.detector}`; tier {f.tier}; stage {f.stage}; "
                     f"{where}): {_clip(f.message, 400)}")
        if f.source_text:
            lines.append(f"  - source: `{_clip(f.source_text, 200)}`")
        if f.ir_line:
            lines.append(f"  - IR: `{_clip(f.ir_line, 240)}`")
        if f.metric:
            lines.append(f"  - metric: {_clip(json.dumps(f.metric, sort_keys=True, default=str), 300)}")
        if f.suggests:
            lines.append(f"  - suggests: {', '.join(f.suggests)}")
    if len(ordered) > limit:
        lines.append(f"- ... and {len(ordered) - limit} lower-severity findings not shown")
    return "\n".join(lines)


def format_history(history: Sequence[str], limit: int = 20) -> str:
    if not history:
        return "(none: this is the first attempt)"
    items = list(history)[-limit:]
    skipped = len(history) - len(items)
    lines = [f"{i}. {h.strip()}" for i, h in enumerate(items, start=skipped + 1)]
    if skipped:
        lines.insert(0, f"({skipped} earlier attempts not shown)")
    return "\n".join(lines)


def _format_field(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Finding) for v in value):
            return format_findings(value)
        if not value:
            return "(none)"
        return "\n".join(f"- {_format_field(v)}" for v in value)
    if isinstance(value, dict):
        return json.dumps(value, indent=2, sort_keys=True, default=str)
    return str(value)


# -------------------------------------------------------------------------------------- rewriter


class LLMRewriter:
    """Proposes rewrites with an ``LLMClient``. Not thread-safe (``last_*`` attributes): one per agent."""

    def __init__(self, client: LLMClient, *, max_repairs: int = 1, max_findings: int = 40, max_history: int = 20):
        self.client = client
        self.max_repairs = max_repairs
        self.max_findings = max_findings
        self.max_history = max_history
        self.last_failure: str | None = None
        self.last_failure_kind: FailureKind | None = None
        self.last_repairs: int = 0
        self.last_replies: list[str] = []

    def __repr__(self) -> str:
        return f"LLMRewriter(client={self.client!r}, max_repairs={self.max_repairs})"

    def build_messages(self, task_source: str, findings: Sequence[Finding], history: Sequence[str],
                       feedback: str | None) -> list[Message]:
        user = render_prompt(
            "rewriter_user",
            task_source=task_source.rstrip("\n"),
            findings=format_findings(findings, self.max_findings),
            history=format_history(history, self.max_history),
            feedback=feedback.strip() if feedback and feedback.strip() else "(none)",
        )
        return [("system", load_prompt("rewriter_system")), ("user", user)]

    def _check(self, reply: ChatReply, task_source: str, known_ids: set[str],
               compile_check: CompileCheck) -> tuple[RewriteProposal | None, FailureKind | None, str | None]:
        """Parse and check one reply: (proposal, None, None) or (None, kind, error for the model)."""
        text = reply.content
        try:
            obj = extract_json_object(text)
            if not (isinstance(obj.get("source"), str) and obj["source"].strip()):
                fenced = _PY_FENCE_RE.search(text)  # JSON metadata + the file in a ```python block
                if fenced:
                    obj["source"] = fenced.group(1)
            proposal = RewriteProposal.model_validate(obj)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            msg = str(exc)
            if hasattr(exc, "errors"):
                msg = "the JSON object does not match the schema: " + "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(object)'}: {e['msg']}" for e in exc.errors()[:8])
            if reply.truncated:
                msg += " (the reply was cut off at the token limit)"
            return None, "parse", f"malformed answer: {msg}"
        if proposal.source.strip() == task_source.strip():
            return None, "unchanged", "the source is identical to the task file: propose an actual rewrite"
        unknown = [i for i in proposal.finding_ids if i not in known_ids]
        if unknown and known_ids:
            log.info("rewriter.unknown_finding_ids", ids=unknown)
            proposal = proposal.model_copy(update={"finding_ids": [i for i in proposal.finding_ids if i in known_ids]})
        try:
            problem = compile_check(proposal.source)
        except Exception as exc:  # noqa: BLE001 - the caller's check crashed on this source: that is feedback
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            return None, "compile", f"the new source fails the task check / compile:\n{problem}"
        return proposal, None, None

    def propose(self, task_source: str, findings: list[Finding], history: list[str], feedback: str | None,
                compile_check: CompileCheck) -> RewriteProposal | None:
        """One rewrite proposal, or None (see ``last_failure``). Never raises for LLM/transport errors."""
        self.last_failure = None
        self.last_failure_kind = None
        self.last_repairs = 0
        self.last_replies = []
        known_ids = {f.id for f in findings}
        messages = self.build_messages(task_source, findings, history, feedback)
        kind: FailureKind | None = None
        error: str | None = None
        for round_ in range(self.max_repairs + 1):
            if round_ > 0:
                self.last_repairs += 1
                log.info("rewriter.repair", round=round_, kind=kind, error=_clip(error or "", 300))
                messages = messages + [("assistant", self.last_replies[-1]),
                                       ("user", render_prompt("rewriter_repair", error=error))]
            try:
                reply = self.client.chat(messages)
            except LLMError as exc:
                return self._fail(exc.kind, f"LLM call failed: {exc}")  # type: ignore[arg-type]
            self.last_replies.append(reply.content)
            proposal, kind, error = self._check(reply, task_source, known_ids, compile_check)
            if proposal is not None:
                log.info("rewriter.proposal", family=proposal.rewrite_family, finding_ids=proposal.finding_ids,
                         repairs=self.last_repairs)
                return proposal
        return self._fail(kind or "error", f"{error} (after {self.last_repairs} repair round(s))")

    def _fail(self, kind: FailureKind, reason: str) -> None:
        self.last_failure_kind = kind
        self.last_failure = reason
        log.warning("rewriter.failed", kind=kind, reason=_clip(reason, 500), repairs=self.last_repairs)
        return None

    def summarize(self, prompt_name: str, **fields: Any) -> str:
        """Prose from ``prompts/<prompt_name>.md`` filled with ``fields`` (lists of findings, lists of
        strings, dicts and models are formatted; missing placeholders read "(not given)"; extra fields
        are appended as sections). Raises ``LLMError`` when the call fails."""
        template = load_prompt(prompt_name)
        rendered = {k: _format_field(v) for k, v in fields.items()}
        user = render_prompt(prompt_name, strict=False, **rendered)
        extras = [k for k in rendered if f"${k}" not in template and f"${{{k}}}" not in template]
        for k in extras:
            user += f"\n\n## {k.replace('_', ' ').capitalize()}\n\n{rendered[k]}"
        return self.client.complete(load_prompt("summary_system"), user).strip()

    def try_summarize(self, prompt_name: str, **fields: Any) -> str | None:
        """``summarize`` that returns None (and logs) instead of raising ``LLMError``."""
        try:
            return self.summarize(prompt_name, **fields)
        except LLMError as exc:
            log.warning("rewriter.summary_failed", prompt=prompt_name, kind=exc.kind, error=str(exc))
            return None
