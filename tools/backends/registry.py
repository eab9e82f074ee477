"""The backends by name: ``get_backend`` (this machine's, checked) and ``lookup`` (a name a record carries)."""

from __future__ import annotations

from tritondx.errors import BackendUnavailable
from tritondx.tools.backends.base import Backend
from tritondx.tools.backends.cuda.backend import CudaBackend
from tritondx.tools.backends.interpreter.backend import InterpreterBackend
from tritondx.tools.backends.npu.backend import NpuBackend

#: every backend, in the order ``auto`` tries them
BACKENDS: tuple[type[Backend], ...] = (CudaBackend, NpuBackend, InterpreterBackend)
_BY_NAME: dict[str, type[Backend]] = {b.name: b for b in BACKENDS}


def names() -> list[str]:
    return sorted(_BY_NAME)


def lookup(name: str | None) -> Backend | None:
    """The backend called ``name``, built without asking whether this machine has it (a name that a run's state,
    a record or a Ray task's arguments carry); None for no name or one no backend has."""
    factory = _BY_NAME.get(name or "")
    return factory() if factory else None


def get_backend(name: str = "auto") -> Backend:
    """The backend called ``name`` on this machine (``auto``: the first of ``BACKENDS`` it has)."""
    if name == "auto":
        for factory in BACKENDS:
            b = factory()
            if b.available():
                return b
    if name not in _BY_NAME:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of {', '.join(names())} or auto")
    b = _BY_NAME[name]()
    if not b.available():
        raise BackendUnavailable(f"backend {name!r} is not available on this machine ({b.describe()})")
    return b
