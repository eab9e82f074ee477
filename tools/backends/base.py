"""Hardware behind one small interface; a registry builds a backend by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable


class Backend(ABC):
    """Where candidates run: the interpreter (CPU), a CUDA GPU, or an Ascend NPU."""

    name: str = ""
    torch_device: str = "cpu"
    #: whether this backend's times are real device times (the interpreter's are not)
    can_time: bool = False
    #: whether Nsight Compute reads this backend's hardware counters (the profile tier's ncu run, the hardware
    #: check of a claimed speedup, the final profile); ncu itself may still be missing (``evidence.ncu.ncu_path``)
    nsight_compute: bool = False

    @abstractmethod
    def available(self) -> bool:
        """True when this machine can run kernels on this backend."""

    def job_env(self) -> dict[str, str]:
        """Extra environment for sandboxed jobs."""
        return {}

    def default_ir_target(self) -> str:
        """The compile target for IR capture when none is named."""
        return "cuda:90"

    def describe(self) -> str:
        return self.name


_REGISTRY: dict[str, Callable[[], Backend]] = {}


def register(name: str):
    def wrap(factory: Callable[[], Backend]):
        _REGISTRY[name] = factory
        return factory
    return wrap


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_backend(name: str = "auto") -> Backend:
    from tritondx.errors import BackendUnavailable
    from tritondx.tools.backends import cuda, interpreter, npu  # noqa: F401  (registration)
    if name == "auto":
        for candidate in ("cuda", "npu", "interpreter"):
            b = _REGISTRY[candidate]()
            if b.available():
                return b
    if name not in _REGISTRY:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of {', '.join(names())} or auto")
    b = _REGISTRY[name]()
    if not b.available():
        raise BackendUnavailable(f"backend {name!r} is not available on this machine ({b.describe()})")
    return b
