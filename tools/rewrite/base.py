"""What a rewrite sees and what it proposes; the registry of rewrite families."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tritondx.tools.records.evidence import Finding
from tritondx.tools.task.spec import TaskSpec


@dataclass
class RewriteContext:
    spec: TaskSpec                      # the current best version (rewrites build on it)
    original: TaskSpec                  # the initial task
    kernel_class: str
    findings: list[Finding]
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype name -> (atol, rtol)
    dtypes: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)
    insufficient: set[str] = field(default_factory=set)
    #: families whose last accepted candidate could not be timed: proposing them again proves nothing
    unmeasured_families: set[str] = field(default_factory=set)
    #: families to try first this round (suggestions of open findings never tried: tools/report/closure.py)
    prefer: set[str] = field(default_factory=set)
    #: families a person's feedback said not to propose (tools/rewrite/feedback.py)
    avoid: set[str] = field(default_factory=set)
    #: families whose whole job the tuner's search did for this version (agents/rewriter.py ``TUNED_FAMILIES``)
    covered: set[str] = field(default_factory=set)

    #: the backend times candidates (a GPU): a batch family's proposals are timed side by side in one bench job
    can_time: bool = False

    def motivating(self, family: str, detectors: tuple[str, ...] = ()) -> list[Finding]:
        """Findings that suggest ``family`` (or come from one of ``detectors``, the ones it answers), not yet found
        insufficient."""
        return [f for f in self.findings if f.id not in self.insufficient
                and (family in f.suggests or f.detector in detectors)]

    def per_kernel(self, family: str, motivating: list[Finding], sizes, build, params, prediction: str
                   ) -> list["Proposal"]:
        """One proposal per motivated kernel and size: ``build(source, kernel, *size)`` gives ``(source, what)`` or
        None (the sizes after the first that does not apply are not tried); ``params(kernel, *size)`` its params."""
        kernels = {f.kernel for f in motivating}
        out = []
        for k in self.spec.kernels:
            if k.name not in kernels and None not in kernels:
                continue
            for size in sizes:
                res = build(self.spec.source, k.name, *size)
                if res is None:
                    break
                src, what = res
                out.append(Proposal(family, src, params(k.name, *size), what,
                                    [f.id for f in motivating if f.kernel in (k.name, None)], prediction))
        return out


@dataclass
class Proposal:
    family: str
    source: str
    params: dict
    description: str
    motivated_by: list[str]
    prediction: str = ""

    @property
    def signature(self) -> str:
        return family_signature(self.family, self.params, self.source)


#: a number in a source: two proposals of one family whose sources differ only in numbers are siblings (another size
#: of the same rewrite), e.g. ``min(64, 2048 // w)`` vs ``min(128, 8192 // w)``
NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def sibling_key(family: str, source: str) -> tuple[str, str]:
    """What two siblings share: the family and the source with its numbers masked."""
    return family, NUMBER.sub("#", source)


def family_signature(family: str, params: dict, source: str) -> str:
    h = hashlib.sha256(source.encode()).hexdigest()[:16]
    return f"{family}:{json.dumps(params, sort_keys=True, default=str)}:{h}"


RewriteFn = Callable[[RewriteContext], list[Proposal]]


@dataclass(frozen=True)
class RewriteFamily:
    id: str
    description: str
    fn: RewriteFn
    priority: int   # lower runs first: structural rewrites before configuration search
    also: tuple[str, ...] = ()   # findings suggesting these families motivate this one too
    batch: bool = False          # its proposals are timed side by side in one bench job: not counted in a round's limit


CATALOG: dict[str, RewriteFamily] = {}


def rewrite(id: str, description: str, priority: int, also: tuple[str, ...] = (), batch: bool = False):
    def wrap(fn: RewriteFn) -> RewriteFn:
        CATALOG[id] = RewriteFamily(id, description, fn, priority, also, batch)
        return fn
    return wrap
