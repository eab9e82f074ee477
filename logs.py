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
import threading
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
    from tritondx.tools.report.text import clip
    return clip(text, VALUE_MAX)  # at a word, never mid-word


def progress_line(_logger: Any, _name: str, event: dict[str, Any]) -> str:
    """``09:14:13 select round 1 round_checked passed=[r1c1, r1c3] failed=[r1c2 (mismatch)]``"""
    parts = [time.strftime("%H:%M:%S")]
    level = str(event.get("level", "")).lower()
    if level in ("warning", "error", "critical", "exception"):
        parts.append(level.upper())
    if event.get("node"):
        parts.append(str(event["node"]))
    if event.get("round") is not None:
        parts.append(f"round {event['round']}")
    if event.get("event") == STILL_RUNNING:  # the heartbeat: "still running (40 s): checking 3 candidates ..."
        parts.append(f"still running ({event.get('seconds')} s): {event.get('doing')}")
        return " ".join(parts)
    parts.append(str(event.get("event", "")))
    parts += [f"{k}={_short(v)}" for k, v in event.items() if k not in _IDS and not k.startswith("_")
              and v not in (None, "", [], {})]
    line = " ".join(parts)
    if len(line) <= LINE_MAX:
        return line
    from tritondx.tools.report.text import clip
    return clip(line, LINE_MAX)


#: when this process last printed a progress line on stderr (time.monotonic())
_LAST_LINE = [time.monotonic()]


class _Stamp(logging.Filter):
    """Notes when a line reaches the terminal (the last filter of the console handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        _LAST_LINE[0] = time.monotonic()
        return True


STILL_RUNNING = "still_running"
HEARTBEAT_ENV = "TRITONDX_HEARTBEAT_S"
HEARTBEAT_S = 15.0


def heartbeat_every() -> float:
    """Seconds of silence after which a run says what is still running: ``TRITONDX_HEARTBEAT_S`` or 15."""
    try:
        return max(0.5, float(os.environ.get(HEARTBEAT_ENV) or HEARTBEAT_S))
    except ValueError:
        return HEARTBEAT_S


def _doing(node: str, state: Any) -> str:
    """What a node that has just started on ``state`` is doing, in words."""
    state = state if isinstance(state, dict) else {}
    if node == "triage":
        from tritondx.tools.task.probe_job import probe_timeout
        return (f"running the task once in a sandbox to check it (stopped after {probe_timeout():.0f} s; "
                "TRITONDX_PROBE_TIMEOUT sets the limit)")
    if node == "verifier":
        pending = list(state.get("pending") or [])
        from tritondx.tools.backends.registry import lookup
        backend = lookup(state.get("backend"))
        where = backend.kernels_run_where if backend else ""
        if pending:
            return f"checking {len(pending)} candidate(s) ({', '.join(pending)}){where}"
        return f"checking the round's candidates{where}"
    if node == "verify":  # `tritondx verify TASK CANDIDATE`
        return f"checking {state.get('candidate')} against the task's reference"
    return {"rewriter": "writing the next round's candidates",
            "tuner": "searching launch configurations",
            "bench": "timing the round's survivors against the initial kernel and the best",
            "select": "deciding where the run goes next",
            "report": "writing the report",
            "profiler": "profiling the best kernel so far",
            "ir_analyst": "compiling the kernel and reading its IR",
            "compiler_expert": "compiling the kernel with the compiler's pass dumps",
            "approval": "waiting for a person's answer"}.get(node, "working")


class Heartbeat:
    """While a run's graph works, a line on stderr (and in log.jsonl) whenever nothing was printed for
    ``every`` seconds: which node runs, for how long, and what it is doing. Fed with LangGraph's task
    events (``stream_mode="tasks"``: a task's start carries its input state, its end a result or error)."""

    def __init__(self, every: float | None = None, thread_id: str | None = None) -> None:
        self.every = every or heartbeat_every()
        self.thread_id = thread_id   # the run's graph thread: its lines carry it like every node's
        self.running: dict[str, tuple[str, float, str, Any]] = {}  # task id -> node, started, doing, round
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def task_event(self, ev: Any) -> None:
        if not isinstance(ev, dict) or "id" not in ev:
            return
        with self._lock:
            if "input" in ev:
                state = ev.get("input")
                rnd = state.get("round") if isinstance(state, dict) else None
                try:
                    doing = _doing(str(ev.get("name")), state)
                except Exception:  # progress only: never stops a run
                    doing = "working"
                self.running[ev["id"]] = (str(ev.get("name")), time.monotonic(), doing, rnd)
            else:
                self.running.pop(ev["id"], None)

    def beat(self) -> None:
        """Say what runs, if nothing was printed for ``every`` seconds."""
        now = time.monotonic()
        if now - _LAST_LINE[0] < self.every:
            return
        with self._lock:
            running = list(self.running.values())
        if not running:
            return
        log = structlog.get_logger(PROJECT_LOGGER)
        for node, started, doing, rnd in running:
            log.info(STILL_RUNNING, node=node, round=rnd if node in ("verifier", "bench", "rewriter") else None,
                     seconds=int(now - started), doing=doing,
                     **({"thread_id": self.thread_id} if self.thread_id else {}))
        _LAST_LINE[0] = now

    def _loop(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            try:
                self.beat()
            except Exception:  # progress only
                pass

    def __enter__(self) -> "Heartbeat":
        _LAST_LINE[0] = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="tdx-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


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
        if h is console:
            h.addFilter(_Stamp())  # last: only lines that are printed count (the heartbeat's silence)
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
