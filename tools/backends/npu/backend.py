"""Ascend NPU backend (torch_npu + triton-ascend). npu runtime: untested on hardware."""

from __future__ import annotations

import importlib.util

from tritondx.tools.backends.base import Backend


class NpuBackend(Backend):
    name = "npu"
    torch_device = "npu"
    can_time = True

    def available(self) -> bool:
        if importlib.util.find_spec("torch_npu") is None:
            return False
        try:
            import torch
            import torch_npu  # noqa: F401
            return bool(torch.npu.is_available())
        except Exception:  # a broken torch_npu install means: not available
            return False

    def default_ir_target(self) -> str:
        return "ascend910b"

    def describe(self) -> str:
        return "Ascend NPU through torch_npu (npu runtime: untested on hardware)"
