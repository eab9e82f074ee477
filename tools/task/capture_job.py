"""IR capture, orchestrator side: compile a task's kernels for a named target (``cuda:90``, ...) in a sandboxed
``capture`` job (its worker side is ``bench/capture.py``; no device needed) and answer the manifest of what it
wrote, or the reason it could not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritondx.tools.exec.jobs import job_error
from tritondx.tools.exec.sandbox import run_job


def capture_ir(task_path: str, out_dir: Path, target: str, per_pass: bool, timeout: float = 600,
               shape: Any = None) -> tuple[dict[str, Any] | None, str]:
    """The IR of every launch of ``task_path`` compiled for ``target``, written under ``out_dir`` (with the
    per-pass MLIR dumps when ``per_pass``; ``shape``: the launch's shape, else the task's first). (manifest, "")
    or (None, "class: reason")."""
    job = {"kind": "capture", "task": str(Path(task_path).resolve()), "target": target,
           "out_dir": str(out_dir.resolve()), "per_pass": per_pass, "shape": shape}
    r = run_job(job, timeout=timeout)
    if r.ok and r.result and "launches" in r.result:
        return r.result, ""
    klass, reason = job_error(r)
    return None, f"{klass}: {reason}"
