"""NVIDIA backend: kernels run and are timed on the local CUDA GPU."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

from tritondx.tools.backends.base import Backend

#: a GPU of ``nvidia-smi -L``: "GPU 0: NVIDIA H200 (UUID: GPU-...)"
SMI_GPU_RE = re.compile(r"^GPU (\d+):", re.M)


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


class CudaBackend(Backend):
    name = "cuda"
    torch_device = "cuda"
    can_time = True
    nsight_compute = True
    ray_grants_gpus = True

    def available(self) -> bool:
        return _gpu_query() is not None

    def default_ir_target(self) -> str:
        q = _gpu_query()
        if not q:
            return "cuda:90"
        major, _, minor = q[1].partition(".")
        return f"cuda:{int(major) * 10 + int(minor or 0)}"

    def pinnable_devices(self) -> list[str]:
        """The ids in ``$CUDA_VISIBLE_DEVICES`` (up to the first invalid entry, where CUDA stops too), else the
        ``GPU n:`` lines of ``nvidia-smi -L``."""
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None:
            ids = []
            for x in cvd.split(","):
                x = x.strip()
                if not x or x.startswith("-"):  # CUDA stops at the first invalid entry
                    break
                ids.append(x)
            return ids
        exe = shutil.which("nvidia-smi")
        if not exe:
            return []
        try:
            r = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return []
        return [m.group(1) for m in SMI_GPU_RE.finditer(r.stdout)] if r.returncode == 0 else []

    def describe(self) -> str:
        q = _gpu_query()
        return f"CUDA GPU {q[0]} (sm_{q[1].replace('.', '')})" if q else "no NVIDIA GPU found (nvidia-smi)"
