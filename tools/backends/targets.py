"""The IR target a run names (``--target``), checked before anything is made.

- ``cuda:<capability>``: the capability must be one the ptxas bundled with Triton accepts (``cuda:999``
  would otherwise reach the compiler, crash the capture job and leave a run that looks finished);
- ``ascend*``: a target triton-ascend knows (``tools/npu/targets.py``), and its environment must be
  there: on first use it is installed (``tools/npu/toolchain.py``) with pip's progress on stderr, unless
  ``TRITONDX_NPU_AUTO_INSTALL=0`` or ``$TRITONDX_NPU_PYTHON`` names another one; otherwise one line says how.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

from tritondx.errors import BackendUnavailable, TritonDXError

# ptxas --help lists the architectures it accepts, e.g. "'sm_87','sm_89','sm_90','sm_90a',"
PTXAS_ARCH_RE = re.compile(r"'sm_(\d+)a?'")
AUTO_INSTALL_ENV = "TRITONDX_NPU_AUTO_INSTALL"


def _ptxas() -> Path | None:
    try:
        import triton
    except ImportError:
        return None
    exe = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return exe if exe.exists() else None


@lru_cache(maxsize=1)
def cuda_capabilities() -> tuple[int, ...]:
    """Compute capabilities Triton's bundled ptxas compiles for (empty: no ptxas to ask)."""
    exe = _ptxas()
    if exe is None:
        return ()
    try:
        out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(sorted({int(m) for m in PTXAS_ARCH_RE.findall(out)}))


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


def check_target(target: str | None, progress: Callable[[str], None] = _stderr) -> str | None:
    """The canonical target name, or a one-line ``TritonDXError`` for a target no run could use."""
    if not target:
        return None
    if target.lower().startswith("ascend"):
        from tritondx.tools.npu.targets import resolve_target
        name = resolve_target(target).name
        ensure_ascend_toolchain(name, progress)
        return name
    backend, _, arch = target.partition(":")
    if backend != "cuda" or not arch.isdigit():
        raise TritonDXError(f"--target {target}: unknown target; use cuda:<compute capability> (e.g. cuda:90) "
                            "or ascend910b, ascend910_93, ascend950")
    known = cuda_capabilities()
    if known and int(arch) not in known:
        raise TritonDXError(f"--target {target}: Triton's ptxas cannot compile for sm_{arch}; choose one of "
                            f"{', '.join(f'cuda:{c}' for c in known)}")
    return f"cuda:{int(arch)}"
