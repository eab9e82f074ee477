"""Domain exceptions. Each carries a one-line message meant for the user."""

from __future__ import annotations


class TritonDXError(Exception):
    """Base class: the message is a single line naming the file and the problem."""


class TaskFormatError(TritonDXError):
    """A task file breaks the task format."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class SandboxError(TritonDXError):
    """A subprocess job crashed, hung or returned nothing."""


class CompileError(TritonDXError):
    """Triton could not compile a kernel for the chosen target."""


class BackendUnavailable(TritonDXError):
    """The requested backend has no device or toolchain here."""
