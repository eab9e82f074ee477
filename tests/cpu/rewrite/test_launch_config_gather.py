"""launch_config on gather kernels: fewer elements per thread first (triage's index_arith_loads finding).

On the H200 every larger block of l2_maxpool2d (BLOCK=256, 4 warps, 2 outputs per thread, stride-2 windows
through // and % of the offsets) was slower (0.83x ... 0.34x, 2026-11-30): the expert must also try one output
per thread (same BLOCK, more warps) and a halved BLOCK, ahead of the larger blocks. Plain contiguous
elementwise kernels keep the larger-block search unchanged.
"""

from __future__ import annotations

from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.launch_config import FLAT_SPACE, downward_space
from tritondx.tools.rewrite.maxpool_template import MAXPOOL_TILES


def _gather_findings(ctx):
    return [f for f in ctx.findings if f.detector == "index_arith_loads"]


def _configs(props, kernel):
    return [(p.params[kernel]["BLOCK"], p.params[kernel]["num_warps"]) for p in props
            if p.family == "launch_config" and kernel in p.params]


def test_triage_finds_gathers_only_where_every_load_is_one(rw):
    (f,) = _gather_findings(rw.make_context("l2_maxpool2d"))
    assert f.kernel == "maxpool_kernel" and f.tier == "triage" and "launch_config" in f.suggests
    assert f.metric == {"divmod_loads": 1, "indirect_loads": 0} and "tl.load(" in f.source_text
    (g,) = _gather_findings(rw.make_context("l2_avgpool2d"))
    assert g.kernel == "avgpool_kernel"
    # contiguous loads (possibly next to a // or % broadcast load, or rows chosen by a loaded index): no finding
    for task in ("l1_add", "l1_mul", "l2_batchnorm", "l1_gather", "l2_softmax"):
        assert _gather_findings(rw.make_context(task)) == [], task


def test_downward_space():
    assert downward_space(256, 4) == [(256, 8), (128, 4)]     # 2 per thread -> 1 per thread, then half the block
    assert downward_space(1024, 4) == [(1024, 16), (512, 4)]  # warps capped at 16
    assert downward_space(128, 4) == []                       # already one per thread
    assert downward_space(256, 8) == []
    assert downward_space(256, -1) == []                      # computed num_warps: left alone


def test_expert_tries_fewer_elements_per_thread_first(rw, tmp_path):
    ctx = rw.make_context("l2_maxpool2d")
    props = propose(ctx, limit=4)   # one round of the expert
    lc = [p for p in props if p.family == "launch_config"]
    assert _configs(lc, "maxpool_kernel") == [(256, 8), (128, 4)]
    gid = _gather_findings(ctx)[0].id
    for p in lc:
        assert gid in p.motivated_by and "fewer elements per thread" in p.prediction
    # every larger block comes after them
    everything = _configs(rw.CATALOG["launch_config"].fn(ctx), "maxpool_kernel")
    assert everything[:2] == [(256, 8), (128, 4)]
    assert all(b * 4 >= 256 * w for b, w in everything[2:]) and (1024, 4) in everything[2:]
    # the max_pool2d template's tiles are the small ones too (one output per thread)
    tiles = [(p.params["tile"], p.params["num_warps"]) for p in props if p.params.get("template") == "maxpool2d_tiles"]
    assert tiles == [(t, w) for t, _, w in MAXPOOL_TILES] and all(t // (32 * w) == 1 for t, w in tiles)
    for p in lc:
        rw.verify("l2_maxpool2d", p.source, tmp_path, label=f"b{p.params['maxpool_kernel']['BLOCK']}")


def test_gather_ordering_follows_the_finding(rw):
    ctx = rw.make_context("l2_maxpool2d")
    ctx.insufficient |= {f.id for f in _gather_findings(ctx)}   # tried and not enough: back to the usual order
    got = _configs(rw.CATALOG["launch_config"].fn(ctx), "maxpool_kernel")
    assert got == [c for c in FLAT_SPACE if c != (256, 4)]


def test_contiguous_elementwise_unchanged(rw):
    ctx = rw.make_context("l1_add")
    props = rw.CATALOG["launch_config"].fn(ctx)
    got = _configs(props, "add_kernel")
    assert got == [c for c in FLAT_SPACE if c != (1024, 4)]          # the usual larger-block-first search
    assert (1024, 16) not in got and got[0][0] > 1024
    assert not any("gather" in p.prediction for p in props)
