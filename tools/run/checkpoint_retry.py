"""Checkpoint writes that wait out a locked database instead of ending the run.

SQLite's busy timeout (``sqlite3.connect(timeout=30)``) already makes each statement wait up to 30 s
for a lock held by another process (a backup, a ``sqlite3`` shell in a transaction, ``tritondx show``
on a slow disk). A run that has been going for hours should not die because a lock lasted longer:
``PatientSqliteSaver`` retries a write that still failed with ``database is locked`` / ``busy`` for
up to ``TRITONDX_CHECKPOINT_PATIENCE_S`` seconds (default 600), backing off, logging each retry.
Both writes are idempotent (``INSERT OR REPLACE`` / ``INSERT OR IGNORE``), so repeating one is safe.
"""

from __future__ import annotations

import os
import sqlite3

import structlog
from langgraph.checkpoint.sqlite import SqliteSaver
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

log = structlog.get_logger(__name__)

DEFAULT_PATIENCE_S = 600.0


def is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _patience() -> float:
    try:
        return float(os.environ.get("TRITONDX_CHECKPOINT_PATIENCE_S") or DEFAULT_PATIENCE_S)
    except ValueError:
        return DEFAULT_PATIENCE_S


def _log_retry(state) -> None:
    log.warning("checkpoint_db_locked", attempt=state.attempt_number,
                waited_s=round(state.seconds_since_start, 1), error=str(state.outcome.exception()))


class PatientSqliteSaver(SqliteSaver):
    """``SqliteSaver`` whose writes retry while another process holds the database lock."""

    def _retrying(self) -> Retrying:
        return Retrying(retry=retry_if_exception(is_lock_error), stop=stop_after_delay(_patience()),
                        wait=wait_exponential(multiplier=0.5, max=10), before_sleep=_log_retry, reraise=True)

    def _rollback(self) -> None:
        with self.lock:  # a statement that failed on the lock may leave an implicit transaction open
            try:
                if self.conn.in_transaction:
                    self.conn.rollback()
            except sqlite3.Error:
                pass

    def put(self, config, checkpoint, metadata, new_versions):
        for attempt in self._retrying():
            with attempt:
                try:
                    return super().put(config, checkpoint, metadata, new_versions)
                except sqlite3.OperationalError:
                    self._rollback()
                    raise

    def put_writes(self, config, writes, task_id, task_path: str = "") -> None:
        for attempt in self._retrying():
            with attempt:
                try:
                    return super().put_writes(config, writes, task_id, task_path)
                except sqlite3.OperationalError:
                    self._rollback()
                    raise
