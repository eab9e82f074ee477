"""CUDA compile targets (``cuda:<compute capability>``): the capability must be one the ptxas bundled with Triton
accepts (``cuda:999`` would otherwise reach the compiler, crash the capture job and leave a run that looks
finished). Triton's own compile job captures their IR (``TargetFamily.triton_capture``)."""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Callable

from tritondx.errors import TritonDXError
from tritondx.tools.backends.base import TargetFamily

# ptxas --help lists the architectures it accepts, e.g. "'sm_87','sm_89','sm_90','sm_90a',"
PTXAS_ARCH_RE = re.compile(r"'sm_(\d+)a?'")


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


class CudaTargets(TargetFamily):
    backend = "cuda"
    triton_capture = True

    def owns(self, target: str) -> bool:
        family, _, arch = target.partition(":")
        return family == "cuda" and arch.isdigit()

    def check(self, target: str, progress: Callable[[str], None]) -> str:
        arch = target.partition(":")[2]
        known = cuda_capabilities()
        if known and int(arch) not in known:
            raise TritonDXError(f"--target {target}: Triton's ptxas cannot compile for sm_{arch}; choose one of "
                                f"{', '.join(f'cuda:{c}' for c in known)}")
        return f"cuda:{int(arch)}"
