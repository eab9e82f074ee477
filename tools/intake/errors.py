"""``CaptureError``: what ``tritondx capture`` answers with one line (a command that cannot run, a kernel that cannot
be made a task); raised by ``capture`` and ``taskgen``."""

from __future__ import annotations

from tritondx.errors import TritonDXError


class CaptureError(TritonDXError):
    """``what`` (a kernel, an option, the command) and its ``problem``."""

    def __init__(self, what: str, problem: str):
        self.problem = problem
        super().__init__(f"{what}: {problem}")
