"""IR and compiler tiers for Ascend targets, through the triton-ascend toolchain environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritondx.tools.records.evidence import Finding, Tier


def analyze_ascend(tier: Tier, task_path: str, target: str, run_dir: Path, round_: int
                   ) -> tuple[list[Finding], dict[str, Any], str]:
    try:
        from tritondx.tools.npu.capture import capture_ascend
        from tritondx.tools.npu.analyze import analyze_capture
    except ImportError as exc:
        return [], {}, f"Ascend analysis unavailable: {exc}"
    from tritondx.errors import TritonDXError
    out_dir = run_dir / "ir" / f"{tier}_round{round_}_{target}"
    try:
        cap = capture_ascend(task_path, target, out_dir)
    except TritonDXError as exc:
        return [], {}, str(exc)
    found = analyze_capture(cap, tier, source=Path(task_path).read_text())
    artifacts = {}
    for k in cap.kernels:
        for stage, ref in k.artifacts.items():
            artifacts[f"{tier}_round{round_}/{Path(ref.path).name}"] = ref.model_dump()
    note = "" if found else f"{target}: pipeline stopped at {cap.stage_reached} ({cap.stop_reason})"
    return found, artifacts, note
