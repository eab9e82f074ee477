"""IR and compiler tiers: capture the kernel's IR for a target, run that tier's detectors."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from tritondx.tools.evidence.records import ArtifactRef, Finding, Tier
from tritondx.tools.ir.context import KernelIR, load_capture
from tritondx.tools.ir.detectors import resource_report, run_detectors
from tritondx.tools.run.phases import Phases
from tritondx.tools.verify.api import capture_ir


def _ref(path: Path, kind: str) -> ArtifactRef:
    data = path.read_bytes()
    return ArtifactRef(path=str(path), sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), kind=kind)


# A kernel's definition in the task source:  def softmax_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
KERNEL_DEF_RE = r"^\s*def\s+{name}\s*\("


def attribute_sources(found: list[Finding], kernels: list[KernelIR]) -> None:
    """Give every finding a source line: the one its quoted IR line maps to, else (kernel-wide findings:
    resources, pass summaries) the kernel's ``def`` line."""
    by_name = {k.name: k for k in kernels}
    for f in found:
        k = by_name.get(f.kernel or "")
        if f.source_line is not None or k is None:
            continue
        line = None
        mod = k.ir(f.stage) if f.ir_line else None
        if mod is not None:
            hit = next((ln for ln in mod.lines if ln.text == f.ir_line or ln.text.startswith(f.ir_line)), None)
            if hit is not None and hit.src_line and (not k.source_path or not hit.src_file
                                                       or Path(hit.src_file).name == Path(k.source_path).name):
                line = hit.src_line
        if line is None:
            pat = re.compile(KERNEL_DEF_RE.format(name=re.escape(k.name)))
            line = next((i + 1 for i, t in enumerate(k.source.splitlines()) if pat.match(t)), None)
        if line is not None:
            f.source_line, f.source_text = line, k.source_text(line)


def analyze_tier(tier: Tier, task_path: str, target: str, run_dir: Path, round_: int,
                 sm_count: int | None = None, phases: Phases | None = None) -> tuple[list[Finding], dict[str, Any], str]:
    """(findings, artifacts by name, note). The note says why nothing was found, if so. ``phases``:
    where the capture job's seconds are added (``ir_compile``)."""
    phases = phases or Phases()
    if target.startswith("ascend"):
        from tritondx.tools.npu.bridge import analyze_ascend
        return analyze_ascend(tier, task_path, target, run_dir, round_)
    out_dir = run_dir / "ir" / f"{tier}_round{round_}"
    with phases.time("ir_compile"):
        manifest, error = capture_ir(task_path, out_dir, target, per_pass=(tier == "compiler"))
    if manifest is None:
        return [], {}, f"IR capture for {target} failed: {error}"
    arch = int(target.partition(":")[2] or 90)
    kernels = load_capture(out_dir / "manifest.json", Path(task_path).read_text(), arch=arch, sm_count=sm_count,
                           source_path=task_path)
    found = run_detectors(kernels, tier)
    if tier == "ir":
        found += [resource_report(k) for k in kernels]
    attribute_sources(found, kernels)
    artifacts: dict[str, Any] = {f"{tier}_round{round_}/manifest": _ref(out_dir / "manifest.json", "manifest").model_dump()}
    for rec in manifest["launches"]:
        for stage, p in rec.get("stages", {}).items():
            artifacts[f"{tier}_round{round_}/{Path(p).name}"] = _ref(Path(p), stage).model_dump()
    return found, artifacts, ""
