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
    autotune_widen,
    causal_split,
    cheap_math,
    dot,
    fuse_launches,
    grid_to_cores,
    grouped,
    index_width,
    launch_config,
    mask_removal,
    matmul_templates,
    norm_templates,
    persistent,
    pipelining,
    row_resident,
    row_templates,
    strided_args,
    templates,
    tile_2d,
    vectorize,
)
from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteContext
from tritondx.tools.task import parse_task_source


def propose(ctx: RewriteContext, limit: int = 4) -> list[Proposal]:
    out: list[Proposal] = []
    seen_sources = {ctx.spec.source}
    for family in sorted(CATALOG.values(), key=lambda f: f.priority):
        if not ctx.motivating(family.id) or family.id in ctx.unmeasured_families:
            continue
        for p in family.fn(ctx):
            if p.signature in ctx.tried or p.source in seen_sources:
                continue
            try:
                parse_task_source(p.source, ctx.spec.path)
            except Exception:  # a rewrite that breaks the format is a bug in the rewrite: skip it
                continue
            seen_sources.add(p.source)
            out.append(p)
            if len(out) >= limit:
                return out
    return out
