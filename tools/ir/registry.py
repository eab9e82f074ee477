"""One detector registry for every target: CUDA (``tools/ir/detectors/``) and Ascend (``tools/npu/detectors/``).

A detector is a function registered with :func:`detector`: its id, the tier it belongs to (``ir`` reads the final
IR stages and resources; ``compiler`` reads what the compiler made of the program: the per-pass dumps, the
Ascend adapter IR), the stages it needs (``required_stages``), the target families whose captures it reads
(``targets``: ``cuda``, ``ascend``) and the rewrite families it suggests. ``run_detectors`` asks, for every
kernel view of a capture, which detectors apply: those of its family whose required stages the view has.

A kernel view (``context.KernelIR`` for CUDA, ``npu.kernel.KernelContext`` for Ascend) says which family it
belongs to (``target_family``), which stages it holds (``stages``) and builds a detector's findings
(``finding``), quoting its IR line and the task source line that line maps to.

A package's detectors register when it is imported: ``import tritondx.tools.ir.detectors`` (CUDA),
``import tritondx.tools.npu.detectors`` (Ascend).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tritondx.tools.records.evidence import Finding, Tier

#: Rewrite families a detector may suggest: the CUDA rewrite catalog's, then the Ascend ones
#: (``tools/rewrite/ascend.py``; ``contiguous_retile`` and ``multibuffer_hint`` have no rewrite yet).
REWRITE_FAMILIES = ("launch_config", "alignment_hints", "vectorize_scalar_loop", "tl_dot", "grouped_ordering",
                    "pipelining", "fuse_passes", "fuse_launches", "split_k", "persistent", "mask_removal",
                    "index_width", "tile_2d",
                    "contiguous_retile", "int32_indices", "multibuffer_hint", "ub_retile", "grid_fold_to_cores",
                    "block_multiple_of_16", "remove_gpu_launch_settings", "split_blocks_for_cores")


class KernelView(Protocol):
    """What the registry asks of one compiled kernel."""

    target_family: str

    @property
    def name(self) -> str: ...

    @property
    def stages(self) -> frozenset[str]: ...

    def finding(self, det: "Detector", message: str, *args: Any, **kwargs: Any) -> Finding: ...


@dataclass(frozen=True)
class Detector:
    id: str
    tier: Tier
    required_stages: tuple[str, ...]
    targets: tuple[str, ...]
    suggests: tuple[str, ...]
    description: str
    fn: Callable[..., list[Finding]]
    scope: str = "launch"   # "launch": fn(det, k); "capture": fn(det, kernels) over every launch of one capture
    cites: str | None = None  # the stage its findings name when it is not the first required one

    @property
    def stage(self) -> str:
        """The stage a finding of this detector names unless it says otherwise."""
        return self.cites or (self.required_stages[0] if self.required_stages else "ir")

    def applies(self, k: KernelView) -> bool:
        """True when ``k`` is of a family this detector reads and holds every stage it needs."""
        return k.target_family in self.targets and all(s in k.stages for s in self.required_stages)

    def run(self, k: KernelView) -> list[Finding]:
        if not self.applies(k):
            return []
        return self.fn(self, [k]) if self.scope == "capture" else self.fn(self, k)

    def run_capture(self, kernels: Sequence[KernelView]) -> list[Finding]:
        if self.scope != "capture":
            return [f for k in kernels for f in self.run(k)]
        ks = [k for k in kernels if self.applies(k)]
        return self.fn(self, ks) if ks else []

    def finding(self, k: KernelView, message: str, *args: Any, **kwargs: Any) -> Finding:
        """A finding of this detector on ``k`` (the view builds it: see its ``finding``)."""
        return k.finding(self, message, *args, **kwargs)


REGISTRY: dict[str, Detector] = {}


def detector(id: str, tier: Tier, required_stages: tuple[str, ...], suggests: tuple[str, ...], description: str,
             *, targets: tuple[str, ...], scope: str = "launch", cites: str | None = None):
    """Register the decorated ``fn(det, k)`` (``scope="capture"``: ``fn(det, kernels)``) as detector ``id``."""
    unknown = set(suggests) - set(REWRITE_FAMILIES)
    if unknown:
        raise ValueError(f"detector {id}: unknown rewrite families {sorted(unknown)}")

    def wrap(fn):
        REGISTRY[id] = Detector(id, tier, tuple(required_stages), tuple(targets), tuple(suggests), description, fn,
                                scope, cites)
        return fn
    return wrap


def detectors(family: str | None = None, tier: Tier | None = None) -> list[Detector]:
    """The registered detectors (in registration order) reading ``family``'s captures, of ``tier``."""
    return [d for d in REGISTRY.values() if (family is None or family in d.targets) and (tier is None or d.tier == tier)]


def run_detectors(kernels: Sequence[KernelView], tier: Tier | None = None,
                  only: Iterable[Detector] | None = None) -> list[Finding]:
    """Every finding of the detectors (of ``tier``; ``only`` these) that apply to the kernels of one capture:
    per kernel the per-launch detectors, then the per-capture ones; the first finding of each id kept."""
    chosen = [d for d in (REGISTRY.values() if only is None else only) if tier is None or d.tier == tier]
    out: dict[str, Finding] = {}
    for k in kernels:
        for det in chosen:
            if det.scope == "launch":
                for f in det.run(k):
                    out.setdefault(f.id, f)
    for det in chosen:
        if det.scope == "capture":
            for f in det.run_capture(kernels):
                out.setdefault(f.id, f)
    return list(out.values())


def catalog_table(family: str | None = None) -> list[dict]:
    """One row per detector (for docs/detectors.md): id, tier, targets, stages, suggests, description."""
    return [{"id": d.id, "tier": d.tier, "targets": list(d.targets), "stages": list(d.required_stages),
             "suggests": list(d.suggests), "description": d.description} for d in detectors(family)]
