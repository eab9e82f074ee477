"""IR and compiler tiers: capture the kernel's IR for a target, run that tier's detectors."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tritondx.tools.evidence import ArtifactRef, Finding, Tier
from tritondx.tools.ir.context import load_capture
from tritondx.tools.ir.detectors import resource_report, run_detectors
from tritondx.tools.verifier import capture_ir


def _ref(path: Path, kind: str) -> ArtifactRef:
    data = path.read_bytes()
    return ArtifactRef(path=str(path), sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), kind=kind)


def analyze_tier(tier: Tier, task_path: str, target: str, run_dir: Path, round_: int,
                 sm_count: int | None = None) -> tuple[list[Finding], dict[str, Any], str]:
    """(findings, artifacts by name, note). The note says why nothing was found, if so."""
    if target.startswith("ascend"):
        from tritondx.tools.npu_bridge import analyze_ascend
        return analyze_ascend(tier, task_path, target, run_dir, round_)
    out_dir = run_dir / "ir" / f"{tier}_round{round_}"
    manifest, error = capture_ir(task_path, out_dir, target, per_pass=(tier == "compiler"))
    if manifest is None:
        return [], {}, f"IR capture for {target} failed: {error}"
    arch = int(target.partition(":")[2] or 90)
    kernels = load_capture(out_dir / "manifest.json", Path(task_path).read_text(), arch=arch, sm_count=sm_count,
                           source_path=task_path)
    found = run_detectors(kernels, tier)
    if tier == "ir":
        found += [resource_report(k) for k in kernels]
    artifacts: dict[str, Any] = {f"{tier}_round{round_}/manifest": _ref(out_dir / "manifest.json", "manifest").model_dump()}
    for rec in manifest["launches"]:
        for stage, p in rec.get("stages", {}).items():
            artifacts[f"{tier}_round{round_}/{Path(p).name}"] = _ref(Path(p), stage).model_dump()
    return found, artifacts, ""
