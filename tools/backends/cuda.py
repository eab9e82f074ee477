"""NVIDIA backend: kernels run and are timed on the local CUDA GPU."""

from __future__ import annotations

import functools
import shutil
import subprocess

from tritondx.tools.backends.base import Backend, register


@functools.lru_cache(maxsize=1)
def _gpu_query() -> tuple[str, str] | None:
    """(name, compute capability) of GPU 0 from nvidia-smi, without creating a CUDA context here."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    name, _, cap = r.stdout.strip().splitlines()[0].rpartition(",")
    return name.strip(), cap.strip()


@register("cuda")
class CudaBackend(Backend):
    name = "cuda"
    torch_device = "cuda"
    can_time = True
    nsight_compute = True

    def available(self) -> bool:
        return _gpu_query() is not None

    def default_ir_target(self) -> str:
        q = _gpu_query()
        if not q:
            return "cuda:90"
        major, _, minor = q[1].partition(".")
        return f"cuda:{int(major) * 10 + int(minor or 0)}"

    def describe(self) -> str:
        q = _gpu_query()
        return f"CUDA GPU {q[0]} (sm_{q[1].replace('.', '')})" if q else "no NVIDIA GPU found (nvidia-smi)"
