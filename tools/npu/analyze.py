"""The Ascend detectors (``tools/npu/detectors/``, in the shared registry) on one kernel given as IR text
(``analyze_kernel``: what the tests use on inline IR) or on every distinct kernel of a capture
(``analyze_capture``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import tritondx.tools.npu.detectors  # noqa: F401  (registers the Ascend detectors)
from tritondx.tools.ir.registry import Detector, run_detectors
from tritondx.tools.npu.adapter_ir import parse_adapter_ir, parse_ttir
from tritondx.tools.npu.kernel import KernelContext, context_for
from tritondx.tools.npu.targets import AscendTarget, resolve_target
from tritondx.tools.records.evidence import Finding, Tier

if TYPE_CHECKING:
    from tritondx.tools.npu.capture import AscendCapture


def analyze_kernel(kernel: str, target: str | AscendTarget, *, ttir: str | None = None, ttadapter: str | None = None,
                   grid: Sequence[int] = (1, 1, 1), num_warps: int | None = None, num_warps_explicit: bool = False,
                   num_stages: int | None = None, launch_options: dict | None = None,
                   source_file: str | None = None, source: str | None = None,
                   detectors: Sequence[Detector] | None = None) -> list[Finding]:
    """Run the detectors (all, or ``detectors``) on one kernel given as IR text (either stage may be missing)."""
    spec = resolve_target(target) if isinstance(target, str) else target
    g = tuple(list(grid) + [1, 1, 1])[:3]
    if source is None and source_file and Path(source_file).exists():
        source = Path(source_file).read_text()
    ctx = KernelContext(
        kernel=kernel, target=spec, ttir=parse_ttir(ttir) if ttir else None,
        adapter=parse_adapter_ir(ttadapter) if ttadapter else None, grid=g, num_warps=num_warps,
        num_warps_explicit=num_warps_explicit, num_stages=num_stages, launch_options=dict(launch_options or {}),
        source_file=source_file, source_lines=source.splitlines() if source is not None else None)
    return run_detectors([ctx], only=detectors or None)


def analyze_capture(capture: "AscendCapture", tier: Tier | None = None, *, source: str | None = None,
                    detectors: Sequence[Detector] | None = None) -> list[Finding]:
    """Findings (of ``tier``) for every distinct kernel specialization in ``capture`` (repeated launches with
    the same specialization are analysed once)."""
    kernels = [context_for(capture, kc, source) for kc in capture.distinct()]
    return run_detectors(kernels, tier, only=detectors or None)
