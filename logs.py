"""Logging of a run: structlog events as JSON lines in the run's ``log.jsonl`` (with node, thread and
checkpoint ids) and one short line per event on stderr (node, round, what happened).

Only the project's own events (loggers under ``tritondx``) are kept, at info (debug with ``-v``);
third-party libraries (matplotlib, httpx, langgraph, ...) reach the log only with warnings and errors.
Secrets are redacted from both.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import structlog

PROJECT_LOGGER = "tritondx"
# Keys every node event carries for the log file; not repeated in the terminal line.
_IDS = {"thread_id", "checkpoint_id", "step", "timestamp", "level", "logger", "event", "node", "round"}
LINE_MAX = 160   # characters of one terminal progress line
VALUE_MAX = 60   # characters of one value in it


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = ", ".join(" ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in value)
        text = f"[{text}]"
    elif isinstance(value, float):
        text = f"{value:.3g}"
    else:
        text = str(value)
    return text if len(text) <= VALUE_MAX else text[: VALUE_MAX - 3] + "..."


def progress_line(_logger: Any, _name: str, event: dict[str, Any]) -> str:
    """``09:14:13 verifier round 1 round_checked passed=[r1c1, r1c3] failed=[r1c2 (mismatch)]``"""
    parts = [time.strftime("%H:%M:%S")]
    level = str(event.get("level", "")).lower()
    if level in ("warning", "error", "critical", "exception"):
        parts.append(level.upper())
    if event.get("node"):
        parts.append(str(event["node"]))
    if event.get("round") is not None:
        parts.append(f"round {event['round']}")
    parts.append(str(event.get("event", "")))
    parts += [f"{k}={_short(v)}" for k, v in event.items() if k not in _IDS and not k.startswith("_")
              and v not in (None, "", [], {})]
    line = " ".join(parts)
    return line if len(line) <= LINE_MAX else line[: LINE_MAX - 3] + "..."


class ProjectOnly(logging.Filter):
    """Records of the project's loggers at the handler's level; others only from warnings up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".")[0] == PROJECT_LOGGER or record.levelno >= logging.WARNING


def setup_logging(log_file: Path | None, verbose: bool = False) -> None:
    """structlog: JSON lines into the run's log file, short lines on stderr; secrets redacted."""
    from tritondx.tools.llm.redact import RedactingFilter, redact_secrets
    register_env_secrets()
    level = logging.DEBUG if verbose else logging.INFO
    handlers: list[logging.Handler] = []
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[
        structlog.stdlib.ProcessorFormatter.remove_processors_meta, progress_line]))
    handlers.append(console)
    if log_file is not None:
        fh = logging.FileHandler(log_file)
        fh.setFormatter(structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.stdlib.add_log_level,
                               structlog.processors.TimeStamper(fmt="iso")],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.JSONRenderer()]))
        handlers.append(fh)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        h.setLevel(level)
        h.addFilter(ProjectOnly())
        h.addFilter(RedactingFilter())  # stdlib records (httpx, openai, langgraph) are redacted too
        root.addHandler(h)
    # third-party loggers stop at warnings (no findfont debug flood); the project's at info or debug
    root.setLevel(logging.WARNING)
    logging.getLogger(PROJECT_LOGGER).setLevel(level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )


def register_env_secrets() -> None:
    """Register with the log redactor every secret this process can see: the value of each environment
    variable with a secret-looking name (API keys, tokens, passwords) and the credentials in a proxy URL,
    so that none of them can reach a log line, a report or a checkpoint through an error message."""
    from urllib.parse import urlsplit

    from tritondx.tools.llm.redact import register_secret
    from tritondx.tools.exec.sandbox import SECRET_NAME
    for name, value in os.environ.items():
        if not value:
            continue
        if "PROXY" in name.upper():
            try:
                parts = urlsplit(value)
                register_secret(parts.password)
                if parts.password:
                    register_secret(f"{parts.username}:{parts.password}")
            except ValueError:
                pass
        elif SECRET_NAME.search(name):
            register_secret(value)
