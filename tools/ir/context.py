"""What a detector sees: one compiled kernel launch with its IR stages, resources and source."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritondx.tools.ir.parse import IRLine, IRModule, PassDump, parse_stage, split_passes
from tritondx.tools.records.evidence import Finding, Severity, finding_id

if TYPE_CHECKING:
    from tritondx.tools.ir.registry import Detector

# Hopper (sm_90) limits used by the occupancy estimate: CUDA C Programming Guide, compute capability 9.0.
ARCH_LIMITS = {
    90: {"sm_count": 132, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
         "smem_per_sm": 228 * 1024, "max_regs_per_thread": 255},
    80: {"sm_count": 108, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
         "smem_per_sm": 164 * 1024, "max_regs_per_thread": 255},
}


@dataclass
class KernelIR:
    """One launch recorded by the capture job."""

    #: the family of compile targets whose detectors read this view (``registry.Detector.targets``)
    target_family = "cuda"

    record: dict[str, Any]
    source: str
    arch: int = 90
    sm_count: int | None = None
    texts: dict[str, str] = field(default_factory=dict)
    source_path: str | None = None

    @classmethod
    def from_record(cls, record: dict[str, Any], source: str, arch: int = 90,
                    sm_count: int | None = None, source_path: str | None = None) -> "KernelIR":
        texts = {}
        for stage, path in record.get("stages", {}).items():
            p = Path(path)
            if p.exists():
                texts[stage] = p.read_text(errors="replace")
        return cls(record=record, source=source, arch=arch, sm_count=sm_count, texts=texts, source_path=source_path)

    @property
    def name(self) -> str:
        return self.record["kernel"]

    @property
    def limits(self) -> dict[str, int]:
        lim = dict(ARCH_LIMITS.get(self.arch, ARCH_LIMITS[90]))
        if self.sm_count:
            lim["sm_count"] = self.sm_count
        return lim

    @property
    def num_warps(self) -> int:
        return int(self.record.get("options", {}).get("num_warps", 4))

    @property
    def num_stages(self) -> int:
        return int(self.record.get("options", {}).get("num_stages", 3))

    @property
    def grid(self) -> list[int]:
        return list(self.record.get("grid", [1, 1, 1]))

    @property
    def programs(self) -> int:
        g = self.grid
        return g[0] * g[1] * g[2]

    @property
    def resources(self) -> dict[str, int]:
        return self.record.get("resources", {})

    @cached_property
    def modules(self) -> dict[str, IRModule]:
        return {s: parse_stage(s, t) for s, t in self.texts.items() if s != "passes"}

    def ir(self, stage: str) -> IRModule | None:
        return self.modules.get(stage)

    @cached_property
    def passes(self) -> list[PassDump]:
        return split_passes(self.texts["passes"]) if "passes" in self.texts else []

    @property
    def stages(self) -> frozenset[str]:
        return frozenset(self.texts)

    def finding(self, det: "Detector", message: str, line: IRLine | None = None, stage: str | None = None,
                severity: Severity = "medium", **metric) -> Finding:
        """A finding of ``det`` quoting ``line`` and the task line it maps to (none when it maps into Triton's
        own library code); ``stage``: the stage it names, the detector's own by default."""
        src_line = line.src_line if line else None
        if line and line.src_file and self.source_path and Path(line.src_file).name != Path(self.source_path).name:
            src_line = None  # the IR line maps into Triton's own library code, not the task
        return Finding(
            id=finding_id(det.id, self.name, src_line),
            detector=det.id, tier=det.tier, stage=stage or det.stage,
            kernel=self.name, severity=severity, message=message, source_line=src_line,
            source_text=self.source_text(src_line), ir_line=line.text[:300] if line else None,
            metric=metric, suggests=list(det.suggests),
        )

    def source_text(self, line: int | None) -> str | None:
        if line is None:
            return None
        lines = self.source.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else None


def load_capture(manifest_path: str | Path, source: str, arch: int = 90, sm_count: int | None = None,
                 source_path: str | None = None) -> list[KernelIR]:
    manifest = json.loads(Path(manifest_path).read_text())
    source_path = source_path or manifest.get("task")
    return [KernelIR.from_record(r, source, arch, sm_count, source_path) for r in manifest["launches"] if "kernel" in r]
