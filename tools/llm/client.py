"""A small, counted, retried client for an OpenAI-compatible chat-completions endpoint.

``LLMClient(config)`` wraps ``langchain_openai.ChatOpenAI`` (its own retries off: ``max_retries=0``)
and retries with tenacity on timeouts, HTTP 429, 5xx and connection errors, with exponential
backoff (``config.retry_wait_s`` doubling, capped at ``config.retry_wait_max_s``; a 429's
``Retry-After`` is honoured up to that cap). 400/401/403/404/422 are never retried.

Structured output is asked for as JSON in the message content and parsed here with pydantic
(``chat_model``): this works with any OpenAI-compatible server, including those without tool
calling or ``response_format`` support. The parser accepts a bare JSON object, one inside a
```json fenced block, or one surrounded by prose.

Errors leave as ``LLMError`` subclasses whose message is redacted and carries no chained exception
(the openai exceptions hold the request, whose headers hold the key).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

import openai
import structlog
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from tritondx.errors import TritonDXError
from tritondx.tools.llm.config import LLMConfig
from tritondx.tools.llm.redact import redact_text

log = structlog.get_logger("tritondx.llm")

T = TypeVar("T", bound=BaseModel)
Role = Literal["system", "user", "assistant"]
Message = tuple[str, str] | BaseMessage

RETRYABLE: tuple[type[BaseException], ...] = (
    openai.APITimeoutError,
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIConnectionError,
)
MAX_ERROR_CHARS = 600
PLACEHOLDER_KEY = "EMPTY"  # sent to local servers that need no key


# --------------------------------------------------------------------------------------------- errors


class LLMError(TritonDXError):
    """The LLM call failed. ``str(err)`` is one redacted line; no key, no chained openai exception."""

    kind = "error"

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 0):
        self.status_code = status_code
        self.attempts = attempts
        message = redact_text(" ".join(str(message).split()))
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS] + "..."
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r}, status_code={self.status_code}, attempts={self.attempts})"


class LLMConfigError(LLMError):
    """No usable configuration (e.g. no API key for api.openai.com)."""

    kind = "config"


class LLMAuthError(LLMError):
    """401/403: the key is wrong or lacks access. Never retried."""

    kind = "auth"


class LLMRequestError(LLMError):
    """The server refused the request (400, 404, 422, context too long ...). Never retried."""

    kind = "request"


class LLMTransportError(LLMError):
    """Timeouts, 429, 5xx or connection errors that outlasted the retries."""

    kind = "transport"


class LLMParseError(LLMError):
    """The reply was not the JSON object asked for. ``reply`` holds the raw text."""

    kind = "parse"

    def __init__(self, message: str, reply: str = "", finish_reason: str | None = None):
        super().__init__(message)
        self.reply = reply
        self.finish_reason = finish_reason


# ---------------------------------------------------------------------------------------------- usage


class LLMUsage(BaseModel):
    """Counters for one client. ``calls``: successful completions; ``attempts``: HTTP requests made."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatReply(BaseModel):
    """One completion: the text, why it stopped and what it cost."""

    content: str
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


# -------------------------------------------------------------------------------------------- parsing

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)
_MAX_BRACE_STARTS = 64


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: the whole text, a ```json fenced block, or the first
    ``{...}`` that decodes. Control characters inside strings (raw newlines) are tolerated.
    Raises ``ValueError`` with a short reason."""
    decoder = json.JSONDecoder(strict=False)
    stripped = (text or "").strip()
    if not stripped:
        raise ValueError("the reply is empty")
    candidates = [stripped] + [m.group(1).strip() for m in _FENCE_RE.finditer(stripped)]
    first_error: str | None = None
    for cand in candidates:
        try:
            obj = decoder.decode(cand)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(obj, dict):
            return obj
    # a JSON object somewhere in prose (raw_decode ignores what follows it)
    starts = [m.start() for m in re.finditer(r"\{", stripped)][:_MAX_BRACE_STARTS]
    for pos in starts:
        try:
            obj, _ = decoder.raw_decode(stripped, pos)
        except json.JSONDecodeError as exc:
            if pos == starts[0]:
                first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(obj, dict):
            return obj
    if not starts:
        raise ValueError("the reply holds no JSON object (no '{' found)")
    raise ValueError(f"the reply is not valid JSON: {first_error or 'no complete object'}")


def parse_model(text: str, schema: type[T]) -> T:
    """Parse ``text`` into ``schema``; raises ``ValueError`` with a short, model-readable reason."""
    obj = extract_json_object(text)
    try:
        return schema.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(object)'}: {err['msg']}" for err in exc.errors()[:8]
        )
        raise ValueError(f"the JSON object does not match the schema: {problems}") from None


# --------------------------------------------------------------------------------------------- client


def _to_message(m: Message) -> BaseMessage:
    if isinstance(m, BaseMessage):
        return m
    role, content = m
    if role == "system":
        return SystemMessage(content=content)
    if role in ("user", "human"):
        return HumanMessage(content=content)
    if role in ("assistant", "ai"):
        return AIMessage(content=content)
    raise ValueError(f"unknown message role {role!r} (system, user, assistant)")


def _content_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _describe(exc: BaseException) -> str:
    """Short text for an openai / langchain exception (redacted by LLMError / the log processor)."""
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        msg = None
        if isinstance(body, dict):
            err = body.get("error", body)
            msg = err.get("message") if isinstance(err, dict) else str(err)
        return f"HTTP {exc.status_code}: {msg or exc.message}"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


class LLMClient:
    """Counted, retried chat calls. Thread-safe counters in ``self.usage`` (an ``LLMUsage``)."""

    def __init__(self, config: LLMConfig):
        if config.api_key is None and config.base_url is None:
            raise LLMConfigError("no API key: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)")
        self.config = config
        self.usage = LLMUsage()
        self._lock = threading.Lock()
        kwargs: dict[str, Any] = dict(
            model=config.model,
            api_key=config.api_key if config.api_key is not None else PLACEHOLDER_KEY,
            timeout=config.timeout_s,
            max_retries=0,  # retries are ours (tenacity)
            temperature=config.temperature,
            use_responses_api=False,  # plain chat-completions: what OpenAI-compatible servers speak
        )
        if config.base_url is not None:
            kwargs["base_url"] = config.base_url
        if config.max_tokens is not None:
            kwargs["max_tokens"] = config.max_tokens
        try:
            self._chat = ChatOpenAI(**kwargs)
        except Exception as exc:  # noqa: BLE001 - pydantic/openai init errors; never chain (kwargs hold the key)
            message = f"cannot set up the chat model: {type(exc).__name__}: {exc}"
        else:
            return
        raise LLMConfigError(message)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, base_url={self.config.base_url!r}, usage={self.usage!r})"

    __str__ = __repr__

    # ------------------------------------------------------------------ internals

    def _count(self, **deltas: float) -> None:
        with self._lock:
            for k, v in deltas.items():
                setattr(self.usage, k, getattr(self.usage, k) + v)

    def _wait(self, state: RetryCallState) -> float:
        cfg = self.config
        wait = min(cfg.retry_wait_s * (2 ** (state.attempt_number - 1)), cfg.retry_wait_max_s)
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, openai.RateLimitError):
            try:
                after = float(exc.response.headers.get("retry-after", ""))
            except (TypeError, ValueError, AttributeError):
                after = None
            if after is not None and after > 0:
                wait = max(wait, min(after, cfg.retry_wait_max_s))
        return wait

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        self._count(retries=1)
        log.warning("llm.retry", model=self.config.model, attempt=state.attempt_number,
                    error=redact_text(_describe(exc)) if exc else None, status=_status(exc) if exc else None,
                    wait_s=round(state.next_action.sleep, 3) if state.next_action else None)

    # ------------------------------------------------------------------ public

    def chat(self, messages: Sequence[Message]) -> ChatReply:
        """One completion for ``messages`` (``("system"|"user"|"assistant", text)`` tuples or langchain
        messages). Retries transient failures; raises an ``LLMError`` subclass otherwise."""
        msgs = [_to_message(m) for m in messages]
        start = time.monotonic()
        attempts = 0

        def once() -> AIMessage:
            nonlocal attempts
            attempts += 1
            self._count(attempts=1)
            return self._chat.invoke(msgs)  # type: ignore[return-value]

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(RETRYABLE),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        error: LLMError | None = None
        try:
            result = retrying(once)
        except openai.APIError as exc:  # includes langchain's subclasses of the openai errors
            error = self._wrap(exc, attempts)
        except Exception as exc:  # noqa: BLE001 - anything else from the stack: wrap, never chain
            error = LLMError(f"LLM call failed: {type(exc).__name__}: {exc}",
                             attempts=attempts)
        if error is not None:
            self._count(failures=1, seconds=time.monotonic() - start)
            log.warning("llm.failed", model=self.config.model, kind=error.kind, status=error.status_code,
                        attempts=error.attempts, error=str(error))
            raise error  # raised outside the except block: no __context__ holding the request
        meta = getattr(result, "usage_metadata", None) or {}
        p_tok = int(meta.get("input_tokens") or 0)
        c_tok = int(meta.get("output_tokens") or 0)
        elapsed = time.monotonic() - start
        self._count(calls=1, prompt_tokens=p_tok, completion_tokens=c_tok, seconds=elapsed)
        rmeta = getattr(result, "response_metadata", None) or {}
        reply = ChatReply(
            content=_content_text(result),
            finish_reason=rmeta.get("finish_reason"),
            model=rmeta.get("model_name") or rmeta.get("model"),
            prompt_tokens=p_tok,
            completion_tokens=c_tok,
            attempts=attempts,
        )
        log.info("llm.call", model=self.config.model, attempts=reply.attempts, prompt_tokens=p_tok,
                 completion_tokens=c_tok, finish_reason=reply.finish_reason, seconds=round(elapsed, 3))
        return reply

    def _wrap(self, exc: openai.APIError, attempts: int) -> LLMError:
        text = _describe(exc)
        status = _status(exc)
        if isinstance(exc, RETRYABLE):
            return LLMTransportError(f"LLM endpoint unavailable after {attempts} attempt(s): {text}",
                                     status_code=status, attempts=attempts)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return LLMAuthError(f"LLM endpoint refused the credentials: {text}", status_code=status,
                                attempts=attempts)
        return LLMRequestError(f"LLM endpoint rejected the request: {text}", status_code=status, attempts=attempts)

    def complete(self, system: str, user: str) -> str:
        """System + user message in, reply text out."""
        return self.chat([("system", system), ("user", user)]).content

    def chat_model(self, messages: Sequence[Message], schema: type[T]) -> tuple[T, ChatReply]:
        """A completion parsed into ``schema`` (JSON in the content). Raises ``LLMParseError`` (with the
        raw reply) when the reply is not a matching JSON object."""
        reply = self.chat(messages)
        try:
            return parse_model(reply.content, schema), reply
        except ValueError as exc:
            reason = str(exc)
            if reply.truncated:
                reason += " (the reply was cut off at the token limit: answer more briefly)"
        raise LLMParseError(reason, reply=reply.content, finish_reason=reply.finish_reason)
