"""What a rewrite sees and what it proposes; the registry of rewrite families."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from tritondx.tools.evidence.records import Finding
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

    #: the backend times candidates (a GPU): a batch family's proposals are timed side by side in one bench job
    can_time: bool = False

    def motivating(self, family: str) -> list[Finding]:
        return [f for f in self.findings if family in f.suggests and f.id not in self.insufficient]


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
