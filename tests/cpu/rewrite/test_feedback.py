"""A person's free-text feedback steers the offline expert only through the rewrite families it names."""

from tritondx.tools.rewrite.base import CATALOG
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.feedback import read_feedback


def test_named_families_are_avoided_or_preferred():
    plan = read_feedback("No launch config please; try autotune, and don't use tl_dot", CATALOG)
    assert plan.avoid == ["launch_config", "tl_dot"] and plan.prefer == ["autotune"]
    assert read_feedback("keep BLOCK a power of two and try fewer warps", CATALOG).empty
    assert read_feedback("", CATALOG).empty and read_feedback(None, CATALOG).empty


def test_expert_follows_the_plan(rw):
    ctx = rw.make_context("add_tiny_block", ["persistent"])
    plain = [p.family for p in propose(ctx, limit=8)]
    assert plain[0] == "persistent" and "launch_config" in plain
    plan = read_feedback("try launch-config first", CATALOG)
    ctx.avoid, ctx.prefer = set(plan.avoid), plan.prefer
    assert propose(ctx, limit=8)[0].family == "launch_config"
    plan = read_feedback("avoid persistent kernels", CATALOG)
    ctx.avoid, ctx.prefer = set(plan.avoid), plan.prefer
    assert {p.family for p in propose(ctx, limit=8)} == {"launch_config"}
