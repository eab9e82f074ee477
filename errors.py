"""Domain exceptions. Each carries a one-line message meant for the user."""

from __future__ import annotations


class TritonDXError(Exception):
    """Base class: the message is a single line naming the file and the problem."""


class TaskFormatError(TritonDXError):
    """A task file breaks the task format."""

    #: the longest problem text kept (a task's own exception text can be arbitrarily long)
    MAX_PROBLEM = 400

    def __init__(self, path: str, problem: str):
        self.path = path
        # One line, whatever the task's exception text held (newlines, tracebacks, huge reprs).
        problem = " ".join(str(problem).split())
        if len(problem) > self.MAX_PROBLEM:
            problem = problem[: self.MAX_PROBLEM - 3] + "..."
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class SandboxError(TritonDXError):
    """A subprocess job crashed, hung or returned nothing."""


class CompileError(TritonDXError):
    """Triton could not compile a kernel for the chosen target."""


class BackendUnavailable(TritonDXError):
    """The requested backend has no device or toolchain here."""
