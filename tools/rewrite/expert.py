"""The offline expert: picks rewrites from the catalog according to the evidence.

Families are tried in priority order (structural rewrites before configuration search); each
family only fires when a finding that suggests it is present and not marked insufficient; a
proposal already tried (same family, parameters and resulting source) is never proposed again. Families
a person's feedback names come first, or not at all after a negation (tools/rewrite/feedback.py).
"""

from __future__ import annotations

from tritondx.tools.rewrite import (  # noqa: F401  (importing a module registers its families and templates)
    absmax_norm,
    alignment,
    ascend,
    autotune,
    autotune_widen,
    causal_split,
    cheap_math,
    deinterleave,
    clone_fold,
    dot,
    flat_tiles,
    fuse_launches,
    grid_per_item,
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
    topk_template,   # the row templates register in this order (templates.TEMPLATES)
    channel_norm_templates,
    index_templates,
    maxpool_template,
    rows_per_program,
    size_branch,
    split_reduction,
    strided_args,
    templates,
    tile_2d,
    vectorize,
)
from tritondx.tools.records.evidence import Finding
from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteContext, sibling_key
from tritondx.tools.task.spec import parse_task_source


def propose(ctx: RewriteContext, limit: int = 4, trail: list[dict] | None = None,
            per_family: int | None = None, siblings: bool = True) -> list[Proposal]:
    """Up to ``limit`` new proposals (at most ``per_family`` of one family, when given). ``trail`` (when given) receives one record per motivated family:
    what it gave this round (``proposed``, ``nothing_new``, ``proposed_nothing``, ``not_reached``,
    ``skipped_unmeasured``, ``avoided_by_person``, ``covered_by_tuner``), the input of the closed-findings table (tools/report/closure.py).
    ``siblings=False``: a proposal whose source differs from one already taken of its family only in numbers (another
    size of the same rewrite) is left out and leaves its slot to the next: where each candidate's launch is searched
    before it is verified, that search covers the other sizes (``tools/tune/candidates.py``)."""
    out: list[Proposal] = []
    seen_sources = {ctx.spec.source}
    taken: set[tuple[str, str]] = set()
    by_id = {f.id: f for f in ctx.findings}
    batch: list[Proposal] = []
    families = sorted(CATALOG.values(), key=lambda f: (f.id not in ctx.prefer, f.priority))
    for family in families:
        if not (ctx.motivating(family.id) or any(ctx.motivating(a) for a in family.also)):
            continue
        if family.id in ctx.avoid:
            _note(trail, family.id, "avoided_by_person", 0)
            continue
        if family.id in ctx.covered:
            _note(trail, family.id, "covered_by_tuner", 0)
            continue
        if family.id in ctx.unmeasured_families:
            _note(trail, family.id, "skipped_unmeasured", 0)
            continue
        # a batch family's candidates (the launch search on a device that times) come on top of the
        # round's limit: they are timed side by side in one bench job
        in_batch = family.batch and ctx.can_time
        if not in_batch and len(out) >= limit:
            _note(trail, family.id, "not_reached", 0)
            continue
        made, fresh = 0, 0
        for p in family.fn(ctx):
            made += 1
            if not in_batch and (len(out) >= limit or (per_family is not None and fresh >= per_family)):
                break
            if p.signature in ctx.tried or p.source in seen_sources:
                continue
            if not siblings and not in_batch and sibling_key(p.family, p.source) in taken:
                continue
            try:
                parse_task_source(p.source, ctx.spec.path)
            except Exception:  # a rewrite that breaks the format is a bug in the rewrite: skip it
                continue
            p.motivated_by = cited(p, by_id)
            seen_sources.add(p.source)
            taken.add(sibling_key(p.family, p.source))
            (batch if in_batch else out).append(p)
            fresh += 1
        _note(trail, family.id, "proposed" if fresh else "nothing_new" if made else "proposed_nothing", fresh)
    return out + batch


def _note(trail: list[dict] | None, family: str, outcome: str, n: int) -> None:
    if trail is not None:
        trail.append({"family": family, "outcome": outcome, "proposed": n})


def cited(p: Proposal, findings: dict[str, Finding]) -> list[str]:
    """The findings a proposal may cite: a finding that wants a launch value larger (or smaller) is
    cited only when the proposal sets that value for that kernel in that direction. Proposals name
    their launch values as ``params[kernel][param]``; a proposal that does not name the value keeps the
    citation (nothing says it goes the wrong way)."""
    out = []
    for fid in p.motivated_by:
        f = findings.get(fid)
        if f is None or not f.wants:
            out.append(fid)
            continue
        values = p.params.get(f.kernel) if isinstance(p.params, dict) and f.kernel else None
        ok = True
        for param, direction in f.wants.items():
            old, new = f.metric.get(param), values.get(param) if isinstance(values, dict) else None
            if isinstance(old, (int, float)) and isinstance(new, (int, float)):
                ok = ok and (new > old if direction == "larger" else new < old)
        if ok:
            out.append(fid)
    return out
