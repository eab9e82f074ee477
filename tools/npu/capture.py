"""Compile a task's kernels with triton-ascend (no NPU needed) and collect the IR stages.

``capture_ascend`` runs ``capture_script.py`` under the interpreter of the triton-ascend
environment (see ``toolchain.py``) in a subprocess with a timeout and a scrubbed environment, then
turns the script's ``manifest.json`` into an :class:`AscendCapture` whose per-kernel stage
artifacts are :class:`~tritondx.tools.records.evidence.ArtifactRef` records (path, sha256, size, kind).

Without CANN the compile stops at the binary stage ("ASCEND_HOME_PATH is not set" on A2/A3, a
missing ``npuc``/``bishengir-compile`` on 950); the TTIR and the adapter IR (``*.ttadapter``:
Linalg with HIVM/HFusion annotations, the output of ``triton-adapter-opt``) are what detectors read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from tritondx.errors import SandboxError
from tritondx.tools.records.evidence import ArtifactRef
from tritondx.tools.npu.targets import AscendTarget, resolve_target
from tritondx.tools.npu.toolchain import find_python

CAPTURE_SCRIPT = Path(__file__).with_name("capture_script.py")
STAGES = ("ttir", "ttadapter", "npubin")
#: Environment variables passed through to the capture subprocess (everything else is dropped:
#: credentials, PYTHONPATH, CUDA/Ascend settings, user TRITON_* knobs).
ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


class KernelCapture(BaseModel):
    """One kernel launch seen while running the task's ``launch``."""

    index: int
    kernel: str
    source_file: str | None = None
    source_lineno: int | None = None
    grid: list[int]
    num_programs: int
    constexprs: dict[str, Any] = Field(default_factory=dict)
    signature: dict[str, str] = Field(default_factory=dict)
    num_warps: int | None = None
    num_warps_explicit: bool = False
    num_stages: int | None = None
    launch_options: dict[str, Any] = Field(default_factory=dict)
    autotune: dict[str, Any] | None = None
    stage_reached: str = "none"             # "none" | "ttir" | "ttadapter" | "npubin"
    stop_stage: str | None = None           # the stage that failed
    stop_reason: str | None = None          # its error line, e.g. "ASCEND_HOME_PATH is not set, ..."
    stop_detail: str | None = None
    artifacts: dict[str, ArtifactRef] = Field(default_factory=dict)  # stage -> file
    repeats: int = 1                        # launches with this same specialization
    same_as: int | None = None              # index of the first launch with the same specialization
    compile_s: float = 0.0

    def ir(self, stage: str) -> str | None:
        ref = self.artifacts.get(stage)
        return ref.read_text() if ref is not None else None


class AscendCapture(BaseModel):
    """What ``capture_ascend`` learned: per kernel the IR stages, how far compilation got, and why it stopped."""

    target: str
    arch: str
    generation: str
    compile_on_910_95: bool
    task_path: str
    shape: Any = None
    dtype: str | None = None
    out_dir: str
    kernels: list[KernelCapture] = Field(default_factory=list)
    stage_reached: str = "none"       # the least advanced stage over the distinct kernels
    stop_reason: str | None = None    # the first stop reason (usually the binary stage's)
    launch_error: str | None = None   # the task's launch() raised (captures before it are kept)
    manifest: ArtifactRef | None = None
    triton_ascend_version: str | None = None
    elapsed_s: float = 0.0
    target_info: AscendTarget

    def kernel(self, name: str) -> KernelCapture | None:
        """The first launch of kernel ``name``."""
        return next((k for k in self.kernels if k.kernel == name), None)

    def distinct(self) -> list[KernelCapture]:
        """One entry per compiled specialization (repeated launches dropped)."""
        return [k for k in self.kernels if k.same_as is None]

    def artifact(self, kernel: str, stage: str) -> ArtifactRef | None:
        k = self.kernel(kernel)
        return k.artifacts.get(stage) if k else None


def _scrubbed_env(cache_root: Path, keep_ascend_env: bool) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_PASSTHROUGH if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TRITON_DISABLE_LINE_INFO": "0",   # keep loc() in the adapter IR
        "TRITON_CACHE_DIR": str(cache_root),
        "TRITON_HOME": str(cache_root),
        "OMP_NUM_THREADS": "1",
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",  # do not import torch_npu implicitly
    })
    if keep_ascend_env:  # on a machine with CANN: let the binary stage run too
        env.update({k: v for k, v in os.environ.items()
                    if k.startswith(("ASCEND_", "TRITON_NPU_", "LD_LIBRARY_PATH", "TRITON_ASCEND_"))})
    return env


def _ref(path: str | Path, kind: str) -> ArtifactRef:
    data = Path(path).read_bytes()
    return ArtifactRef(path=str(path), sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), kind=kind)


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def capture_ascend(task_path: str, target: str, out_dir: Path, shape=None, python: str | None = None,
                   timeout: float = 300, *, dtype: str | None = None, seed: int = 0, max_compiles: int = 32,
                   keep_ascend_env: bool = False) -> AscendCapture:
    """Compile every kernel the task launches for ``target`` and collect the IR stages.

    ``target``: ``ascend950``, ``ascend910b`` (A2), ``ascend910_93`` (A3) or a raw arch string
    triton-ascend accepts (``Ascend910B2`` ...). ``shape``: the input shape handed to
    ``make_inputs`` (default: the task's first ``BENCH_SHAPES`` entry; grid-dependent detectors
    read the grid this shape gives). ``python``: the ascend interpreter (default: ``find_python()``).
    Raises ``BackendUnavailable`` without a triton-ascend environment and ``SandboxError`` when the
    subprocess times out or dies without writing its manifest.
    """
    spec = resolve_target(target)
    interp = find_python(python)
    task = Path(task_path).resolve()
    out_dir = Path(out_dir).resolve()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    cmd = [interp, "-I", str(CAPTURE_SCRIPT), "--task", str(task), "--arch", spec.arch, "--out", str(out_dir),
           "--seed", str(seed), "--max-compiles", str(max_compiles),
           "--cube-cores", str(spec.cube_cores), "--vector-cores", str(spec.vector_cores)]
    if spec.compile_on_910_95:
        cmd.append("--compile-on-910-95")
    if shape is not None:
        cmd += ["--shape", json.dumps(list(shape) if isinstance(shape, (list, tuple)) else shape)]
    if dtype is not None:
        cmd += ["--dtype", str(dtype).replace("torch.", "")]
    env = _scrubbed_env(out_dir / "cache", keep_ascend_env)
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(out_dir),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(f"{task}: ascend capture for {spec.arch} took more than {timeout:.0f} s") from exc
    (out_dir / "capture.log").write_text(f"$ {' '.join(cmd)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    manifest_path = out_dir / "manifest.json"
    if not manifest_path.exists():
        raise SandboxError(f"{task}: ascend capture exited {proc.returncode} without a manifest: "
                           f"{_last_line(proc.stderr or proc.stdout)}")
    manifest = json.loads(manifest_path.read_text())

    kernels = []
    for rec in manifest.get("launches", []):
        arts = {}
        for stage, path in (rec.get("artifacts") or {}).items():
            if Path(path).exists():
                arts[stage] = _ref(path, stage)
        fields = {k: v for k, v in rec.items() if k in KernelCapture.model_fields and k != "artifacts"}
        kernels.append(KernelCapture(**fields, artifacts=arts))
    distinct = [k for k in kernels if k.same_as is None]
    order = {s: i for i, s in enumerate(("none",) + STAGES)}
    reached = min((k.stage_reached for k in distinct), key=lambda s: order.get(s, 0)) if distinct else "none"
    stop = next((k.stop_reason for k in distinct if k.stop_reason), None)
    return AscendCapture(
        target=spec.name, arch=spec.arch, generation=spec.generation, compile_on_910_95=spec.compile_on_910_95,
        task_path=str(task), shape=manifest.get("shape"), dtype=manifest.get("dtype"), out_dir=str(out_dir),
        kernels=kernels, stage_reached=reached, stop_reason=stop, launch_error=manifest.get("launch_error"),
        manifest=_ref(manifest_path, "manifest"), triton_ascend_version=manifest.get("triton_ascend_version"),
        elapsed_s=round(time.time() - t0, 3), target_info=spec,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m tritondx.tools.npu.capture TASK TARGET OUT_DIR [SHAPE_JSON]`` (prints the capture as JSON)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3:
        print("usage: capture TASK TARGET OUT_DIR [SHAPE_JSON]", file=sys.stderr)
        return 2
    shape = json.loads(argv[3]) if len(argv) > 3 else None
    cap = capture_ascend(argv[0], argv[1], Path(argv[2]), shape=shape)
    print(cap.model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
