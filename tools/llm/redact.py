"""Keep API keys out of logs, exception messages and reprs.

- ``register_secret(value)``: remember a secret (``LLMConfig`` registers its API key itself).
- ``redact_text(text)``: replace registered secrets, ``Bearer <token>`` and ``sk-...``-looking tokens
  with ``***``.
- ``redact_secrets``: a structlog processor applying ``redact_text`` to every value of the event dict
  (nested dicts, lists and tuples included; other objects are rendered with ``str`` only when that
  text holds a secret). Put it after ``format_exc_info`` and before the renderer::

      structlog.configure(processors=[..., structlog.processors.format_exc_info,
                                      redact_secrets, structlog.processors.JSONRenderer()])

- ``RedactingFilter``: the same for stdlib ``logging`` handlers (httpx/openai log there).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

MASK = "***"
MIN_SECRET_LEN = 6  # shorter values ("", "EMPTY"-like placeholders) would mask ordinary words

_lock = threading.Lock()
_secrets: set[str] = set()
_secret_re: re.Pattern[str] | None = None

_TOKEN_PATTERNS = [
    # Authorization: Bearer <token>  /  "Bearer <token>"
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{4,}"),
    # OpenAI-style keys: sk-..., sk-proj-..., sk-test-...
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
    # api_key=... / "api_key": "..." / api-key: ...
    re.compile(r"(?i)(api[_-]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]{6,}"),
]


def register_secret(value: str | None) -> None:
    """Remember ``value`` so that it is masked wherever it shows up. Short values are ignored."""
    global _secret_re
    if not value or len(value) < MIN_SECRET_LEN:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_re = re.compile("|".join(re.escape(s) for s in ordered))


def redact_text(text: str) -> str:
    """``text`` with every registered secret and token-looking string replaced by ``***``."""
    if not text:
        return text
    pattern = _secret_re
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _TOKEN_PATTERNS[0].sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _TOKEN_PATTERNS[1].sub(MASK, text)
    text = _TOKEN_PATTERNS[2].sub(lambda m: f"{m.group(1)}{MASK}", text)
    return text


def redact_value(value: Any, _depth: int = 0) -> Any:
    """Redact strings inside ``value`` (dicts, lists, tuples, sets recursively)."""
    if _depth > 20:
        return value
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {redact_value(k, _depth + 1): redact_value(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v, _depth + 1) for v in value)
    if isinstance(value, (set, frozenset)):
        return type(value)(redact_value(v, _depth + 1) for v in value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        red = redact_text(text)
        return red if red != text else value
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break logging
        return value
    red = redact_text(text)
    return red if red != text else value


def redact_secrets(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: mask secrets in every value of the event dict."""
    return {k: redact_value(v) for k, v in event_dict.items()}


class RedactingFilter(logging.Filter):
    """stdlib logging filter: renders the message, masks secrets, drops the args."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001
            return True
        red = redact_text(message)
        if red != message:
            record.msg = red
            record.args = None
        return True
