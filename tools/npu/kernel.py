"""What an Ascend detector sees: one compiled kernel (its TTIR and adapter IR, either may be missing), the
target it was compiled for, its launch (grid, options) and the task source; and how a finding on it is built."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from tritondx.tools.npu.adapter_ir import IRModule, Op, parse_adapter_ir, parse_ttir
from tritondx.tools.npu.targets import AscendTarget
from tritondx.tools.records.evidence import Finding, Severity, finding_id

if TYPE_CHECKING:
    from tritondx.tools.ir.registry import Detector
    from tritondx.tools.npu.capture import AscendCapture, KernelCapture

# A launch of the kernel in the task source (``name``: the kernel's, escaped):
#   gather_kernel[grid](x, idx, out, n, BLOCK=1024)
LAUNCH_RE = r"\b{name}\s*\["


@dataclass
class KernelContext:
    """Everything a detector may read about one compiled kernel."""

    #: the family of compile targets whose detectors read this view (``registry.Detector.targets``)
    target_family = "ascend"

    kernel: str
    target: AscendTarget
    ttir: IRModule | None = None
    adapter: IRModule | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    num_warps: int | None = None
    num_warps_explicit: bool = False
    num_stages: int | None = None
    launch_options: dict[str, Any] = field(default_factory=dict)
    source_file: str | None = None
    source_lines: list[str] | None = None

    @property
    def name(self) -> str:
        return self.kernel

    @property
    def stages(self) -> frozenset[str]:
        return frozenset(s for s, m in (("ttir", self.ttir), ("ttadapter", self.adapter)) if m is not None)

    @property
    def num_programs(self) -> int:
        g = self.grid
        return int(g[0]) * int(g[1]) * int(g[2])

    def ir(self, stage: str) -> IRModule | None:
        return self.ttir if stage == "ttir" else self.adapter

    def source_text(self, line: int | None) -> str | None:
        if line is None or not self.source_lines or not (1 <= line <= len(self.source_lines)):
            return None
        return self.source_lines[line - 1].strip()

    def launch_line(self, must_contain: str | None = None) -> int | None:
        """Line of the task source that launches this kernel (``kernel[grid](``)."""
        if not self.source_lines:
            return None
        pat = LAUNCH_RE.format(name=re.escape(self.kernel))
        hits = [i for i, ln in enumerate(self.source_lines, 1) if re.search(pat, ln)]
        if must_contain:
            for i in hits:  # the call may span lines: look a few lines on for the keyword
                block = " ".join(self.source_lines[i - 1:i + 4])
                if must_contain in block:
                    for j in range(i, min(i + 5, len(self.source_lines) + 1)):
                        if must_contain in self.source_lines[j - 1]:
                            return j
        return hits[0] if hits else None

    def finding(self, det: "Detector", message: str, *, op: Op | None = None, ir: IRModule | None = None,
                line: int | None = None, metric: dict | None = None, severity: Severity = "medium",
                suggests: Iterable[str] | None = None) -> Finding:
        """A finding of ``det`` quoting ``op`` (of ``ir``, the detector's stage by default) and the task line it
        maps to, or ``line`` when given."""
        ir = ir or self.ir(det.stage)
        if line is None and op is not None and ir is not None:
            line = ir.source_line(op, self.source_file) if self.source_file else ir.source_line(op)
        return Finding(
            id=finding_id(det.id, self.kernel, line),
            detector=det.id, tier=det.tier, stage=det.stage, kernel=self.kernel, severity=severity,
            message=message, source_line=line, source_text=self.source_text(line),
            ir_line=op.full_text[:400] if op is not None else None,
            metric=dict(metric or {}), suggests=list(suggests if suggests is not None else det.suggests),
        )


def context_for(capture: "AscendCapture", kc: "KernelCapture", source: str | None = None) -> KernelContext:
    """The view of one kernel of a capture (its IR files read and parsed)."""
    source_file = capture.task_path
    if source is None and Path(source_file).exists():
        source = Path(source_file).read_text()
    ttir, adapter = kc.ir("ttir"), kc.ir("ttadapter")
    return KernelContext(
        kernel=kc.kernel, target=capture.target_info, ttir=parse_ttir(ttir) if ttir else None,
        adapter=parse_adapter_ir(adapter) if adapter else None, grid=tuple((kc.grid + [1, 1, 1])[:3]),
        num_warps=kc.num_warps, num_warps_explicit=kc.num_warps_explicit, num_stages=kc.num_stages,
        launch_options=kc.launch_options, source_file=source_file,
        source_lines=source.splitlines() if source is not None else None)
