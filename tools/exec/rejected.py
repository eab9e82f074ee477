"""``Rejected``: what a job's handler raises when the subject of the job fails it (a candidate that breaks
a check, a task whose inputs are unusable). The worker answers it as the job's result, ``{"passed": False,
"class": klass, "error": reason}`` (``worker.run``); anything else a handler raises is classified there."""

from __future__ import annotations


class Rejected(Exception):
    """The job's subject failed: ``klass`` (the result's class, e.g. ``"mismatch"``) and ``reason`` (one line)."""

    def __init__(self, klass: str, reason: str):
        self.klass = klass
        self.reason = reason
        super().__init__(f"{klass}: {reason}")
