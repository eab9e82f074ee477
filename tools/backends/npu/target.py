"""Ascend compile targets (``ascend910b``, ``ascend910_93``, ``ascend950``): a target triton-ascend knows
(``tools/npu/targets.py``), whose environment must be there: on first use it is installed
(``tools/npu/toolchain.py``) with pip's progress on stderr, unless ``TRITONDX_NPU_AUTO_INSTALL=0`` or
``$TRITONDX_NPU_PYTHON`` names another one; otherwise one line says how. Their IR is compiled by triton-ascend
and read by its bridge (``tools/npu/bridge.py``), not by Triton's compile job here (``triton_capture``)."""

from __future__ import annotations

import os
import sys
from typing import Callable

from tritondx.errors import BackendUnavailable
from tritondx.tools.backends.base import TargetFamily

AUTO_INSTALL_ENV = "TRITONDX_NPU_AUTO_INSTALL"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ensure_ascend_toolchain(target: str, progress: Callable[[str], None] = _stderr) -> str:
    """The interpreter of the triton-ascend environment; installs the default one on first use."""
    from tritondx.tools.npu import toolchain
    try:
        return toolchain.find_python()
    except BackendUnavailable as exc:
        why = str(exc).split(";")[0]
    how = toolchain.INSTALL_HINT
    if os.environ.get(toolchain.ENV_VAR) or os.environ.get(AUTO_INSTALL_ENV, "1") == "0":
        raise BackendUnavailable(f"--target {target} needs the triton-ascend environment ({why}); {how}")
    progress(f"tritondx: --target {target} needs triton-ascend, which lives in an environment of its own: "
             f"installing it into {toolchain.DEFAULT_VENV} (first use only; pip's progress follows)")
    try:
        toolchain.install()
        python = toolchain.find_python()
    except BackendUnavailable as exc:
        raise BackendUnavailable(f"--target {target}: installing the triton-ascend environment failed "
                                 f"({str(exc).split(';')[0]}); {how}") from None
    progress(f"tritondx: triton-ascend environment ready ({python})")
    return python


class AscendTargets(TargetFamily):
    backend = "npu"
    triton_capture = False

    def owns(self, target: str) -> bool:
        return target.lower().startswith("ascend")

    def check(self, target: str, progress: Callable[[str], None]) -> str:
        from tritondx.tools.npu.targets import resolve_target
        name = resolve_target(target).name
        ensure_ascend_toolchain(name, progress)
        return name
