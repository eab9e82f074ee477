"""The IR target a run names (``--target``), checked before anything is made, and the family that answers for it:
``cuda:<capability>`` (``cuda/target.py``) or ``ascend*`` (``npu/target.py``)."""

from __future__ import annotations

import sys
from typing import Callable

from tritondx.errors import TritonDXError
from tritondx.tools.backends.base import TargetFamily
from tritondx.tools.backends.cuda.target import CudaTargets
from tritondx.tools.backends.npu.target import AscendTargets

#: every family; a target no family owns is read as a CUDA one (``adapter_for``), as ``check_target`` rejects it
FAMILIES: tuple[TargetFamily, ...] = (CudaTargets(), AscendTargets())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def adapter_for(target: str) -> TargetFamily:
    """The family of a (checked) target: how its IR is captured and read."""
    return next((f for f in FAMILIES if f.owns(target)), FAMILIES[0])


def check_target(target: str | None, progress: Callable[[str], None] = _stderr) -> str | None:
    """The canonical target name, or a one-line ``TritonDXError`` for a target no run could use."""
    if not target:
        return None
    family = next((f for f in FAMILIES if f.owns(target)), None)
    if family is None:
        raise TritonDXError(f"--target {target}: unknown target; use cuda:<compute capability> (e.g. cuda:90) "
                            "or ascend910b, ascend910_93, ascend950")
    return family.check(target, progress)
