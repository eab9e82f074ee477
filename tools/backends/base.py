"""The questions every backend and every family of compile targets answers; ``registry`` builds one by name.

Nothing here imports a concrete backend: ``cuda/``, ``npu/`` and ``interpreter/`` import this module.
"""

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
    #: whether a batch's Ray task asks Ray for a share of a GPU (``num_gpus=1/workers``) and is pinned to the one
    #: Ray grants it; otherwise the Ray tasks ask for none and a local instance gets ``--workers`` CPUs
    ray_grants_gpus: bool = False
    #: where a node's kernels run, as the progress line says it ("checking 2 candidate(s)<this>"); "" for a device
    kernels_run_where: str = ""

    @abstractmethod
    def available(self) -> bool:
        """True when this machine can run kernels on this backend."""

    def job_env(self) -> dict[str, str]:
        """Extra environment for sandboxed jobs."""
        return {}

    def default_ir_target(self) -> str:
        """The compile target for IR capture when none is named."""
        return "cuda:90"

    def pinnable_devices(self) -> list[str]:
        """The device ids a batch can pin its task processes to (``CUDA_VISIBLE_DEVICES=<id>``), asked without
        creating a device context in this process; none where tasks are not pinned."""
        return []

    def describe(self) -> str:
        return self.name


class TargetFamily(ABC):
    """The compile targets (``--target``) one backend's toolchain compiles for: ``cuda:90``, ``ascend910b``.
    It checks a name before anything is made and says how a kernel's IR is read for one of its targets."""

    #: the backend whose toolchain compiles for these targets
    backend: str = ""
    #: whether Triton's own compile job here captures the IR (``task/capture_job.capture_ir``: a manifest of stages,
    #: ttir to ptx and sass, read by ``tools/ir``), so that the IR tier's capture ahead, its detectors and the work
    #: counted from the IR apply; otherwise the family's own toolchain compiles the kernel and its bridge reads the
    #: IR (Ascend: ``tools/npu/bridge.py``, stages ttir, ttadapter, npubin)
    triton_capture: bool = True

    @abstractmethod
    def owns(self, target: str) -> bool:
        """True when ``target`` names one of this family's targets."""

    @abstractmethod
    def check(self, target: str, progress: Callable[[str], None]) -> str:
        """The canonical name of ``target``, or a one-line ``TritonDXError`` when no run could use it."""
