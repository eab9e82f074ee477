"""The offline expert: picks rewrites from the catalog according to the evidence.

Families are tried in priority order (structural rewrites before configuration search); each
family only fires when a finding that suggests it is present and not marked insufficient; a
proposal already tried (same family, parameters and resulting source) is never proposed again.
"""

from __future__ import annotations

from tritondx.tools.rewrite import (  # noqa: F401  (importing a module registers its families and templates)
    alignment,
    ascend,
    autotune,
    dot,
    fuse_launches,
    grouped,
    index_width,
    launch_config,
    launch_search,
    mask_removal,
    matmul_templates,
    norm_templates,
    persistent,
    pipelining,
    row_resident,
    row_templates,
    templates,
    vectorize,
)
from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteContext
from tritondx.tools.task import parse_task_source


def propose(ctx: RewriteContext, limit: int = 4) -> list[Proposal]:
    out: list[Proposal] = []
    seen_sources = {ctx.spec.source}
    batch: list[Proposal] = []
    for family in sorted(CATALOG.values(), key=lambda f: f.priority):
        motivated = ctx.motivating(family.id) or any(ctx.motivating(a) for a in family.also)
        if not motivated or family.id in ctx.unmeasured_families:
            continue
        in_batch = family.batch and ctx.can_time
        if not in_batch and len(out) >= limit:
            continue
        for p in family.fn(ctx):
            if p.signature in ctx.tried or p.source in seen_sources:
                continue
            try:
                parse_task_source(p.source, ctx.spec.path)
            except Exception:  # a rewrite that breaks the format is a bug in the rewrite: skip it
                continue
            seen_sources.add(p.source)
            (batch if in_batch else out).append(p)
            if not in_batch and len(out) >= limit:
                break
    # a batch family's candidates (the launch search on a device that times) come on top of the round's limit:
    # they are timed side by side in one bench job
    return out + batch
