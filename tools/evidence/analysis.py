"""IR and compiler tiers: capture the kernel's IR for a target, run that tier's detectors."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import structlog

from tritondx.tools.backends.targets import adapter_for
from tritondx.tools.evidence import ahead
from tritondx.tools.records.evidence import ArtifactRef, Finding, Tier
from tritondx.tools.ir.context import KernelIR, load_capture
import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.detectors.resources import resource_report
from tritondx.tools.ir.registry import run_detectors
from tritondx.tools.run.phases import Phases
from tritondx.tools.task.capture_job import capture_ir

log = structlog.get_logger(__name__)


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


#: stages only the compiler tier reads: an IR-tier capture that made them ahead of it shows them to no IR detector
COMPILER_STAGES = ("passes",)


def reusable_capture(ir_dir: Path, task_path: str, target: str) -> Path | None:
    """An earlier capture folder of this run (``ir_dir/*``) made with the per-pass dumps, of the same source
    (sha256), target, shape and config as a capture of ``task_path`` now: compiling again would give the
    same files. None when there is none."""
    sha = hashlib.sha256(Path(task_path).read_bytes()).hexdigest()
    for m in sorted(ir_dir.glob("*/manifest.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            man = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        if man.get("per_pass") is True and man.get("source_sha256") == sha and man.get("target") == target \
                and man.get("requested_shape") is None and man.get("config_index", 0) == 0 and man.get("launches"):
            return m.parent
    return None


def copy_capture(src: Path, out_dir: Path) -> dict[str, Any]:
    """The capture in ``src`` as this tier's own folder ``out_dir`` (files copied, the manifest's paths
    moved, ``ahead.place_capture``): every tier keeps its artifacts under its own name."""
    return ahead.place_capture(json.loads((src / "manifest.json").read_text()), out_dir, move=False)


def _capture(tier: Tier, task_path: str, target: str, run_dir: Path, out_dir: Path,
             passes_ahead: bool) -> tuple[dict[str, Any] | None, str]:
    """The tier's capture: an earlier one of this run that compiling again would repeat (``reusable_capture``:
    the IR tier's made with the passes ahead of the compiler tier, or the capture of the initial kernel started
    ahead of the IR tier, ``ahead.py``, which is waited for while it runs), copied; else a compile of its own."""
    ahead.join(run_dir, task_path, target)  # one started for this same source: wait for it, never a second compile
    earlier = reusable_capture(run_dir / "ir", task_path, target)
    if earlier is not None:
        try:
            return copy_capture(earlier, out_dir), ""
        except (OSError, ValueError, KeyError) as exc:  # its files went missing: compile after all
            log.info("capture_not_reused", folder=str(earlier), error=f"{type(exc).__name__}: {exc}"[:200])
    return capture_ir(task_path, out_dir, target, per_pass=(tier == "compiler") or passes_ahead)


def analyze_tier(tier: Tier, task_path: str, target: str, run_dir: Path, round_: int,
                 sm_count: int | None = None, phases: Phases | None = None,
                 passes_ahead: bool = False) -> tuple[list[Finding], dict[str, Any], str]:
    """(findings, artifacts by name, note). The note says why nothing was found, if so. ``phases``:
    where the capture job's seconds are added (``ir_compile``: what this tier waited; an ahead capture's own
    seconds: ``ir_compile_ahead``). ``passes_ahead``: the compiler tier is expected to analyze this same kernel
    next: this capture also dumps every pass (about 1 s more for 3 kernels), which no detector of this tier
    sees, and the compiler tier reuses it instead of compiling the same source again (``reusable_capture``)."""
    phases = phases or Phases()
    if not adapter_for(target).triton_capture:   # triton-ascend compiles it; its bridge reads the IR
        from tritondx.tools.npu.bridge import analyze_ascend
        return analyze_ascend(tier, task_path, target, run_dir, round_)
    out_dir = run_dir / "ir" / f"{tier}_round{round_}"
    with phases.time("ir_compile"):   # the wall time this tier waited: its compile, or the ahead capture's rest
        manifest, error = _capture(tier, task_path, target, run_dir, out_dir, passes_ahead)
    if ahead_s := ahead.take_seconds(run_dir):   # that capture's own seconds, start to end, counted once
        phases.add(ahead.PHASE, ahead_s)
    if manifest is None:
        return [], {}, f"IR capture for {target} failed: {error}"
    arch = int(target.partition(":")[2] or 90)
    kernels = load_capture(out_dir / "manifest.json", Path(task_path).read_text(), arch=arch, sm_count=sm_count,
                           source_path=task_path)
    if tier != "compiler":
        for k in kernels:
            for stage in COMPILER_STAGES:
                k.texts.pop(stage, None)
    found = run_detectors(kernels, tier)
    if tier == "ir":
        found += [resource_report(k) for k in kernels]
    attribute_sources(found, kernels)
    artifacts: dict[str, Any] = {f"{tier}_round{round_}/manifest": _ref(out_dir / "manifest.json", "manifest").model_dump()}
    for rec in manifest["launches"]:
        for stage, p in rec.get("stages", {}).items():
            if tier == "compiler" or stage not in COMPILER_STAGES:
                artifacts[f"{tier}_round{round_}/{Path(p).name}"] = _ref(Path(p), stage).model_dump()
    return found, artifacts, ""
