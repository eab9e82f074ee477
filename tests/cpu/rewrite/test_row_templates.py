"""fuse_passes templates for top-k and GroupNorm (+ activation), matched on the reference."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.channel_norm_templates import groupnorm_spec
from tritondx.tools.rewrite.topk_template import topk_spec


def test_topk_single_pass(rw, tmp_path):
    assert topk_spec(rw.task_path("l3_topk").read_text()) == ("x", "TOPK")
    _, props = rw.proposals("l3_topk", "fuse_passes", detector="roofline")
    p = next(p for p in props if p.params["template"] == "topk_chunked" and p.params["chunk"] == 2048)
    (name,) = rw.kernel_names(p.source)
    k = rw.function(p.source, name)
    loops = [n for n in ast.walk(k) if isinstance(n, ast.For)]
    # one pass over the row (the k selections are unrolled on registers), one load in it
    assert [ast.unparse(lp.iter) for lp in loops] == ["range(0, N, CHUNK)", "tl.static_range(K)"]
    assert len(rw.calls(k, "tl.load")) == 1
    # (3, 4097) is read in three chunks of 2048: the merge with the running list is exercised
    rw.verify("l3_topk", p.source, tmp_path)


def test_groupnorm_structure(rw):
    s = groupnorm_spec(rw.task_path("l2_groupnorm_swish").read_text())
    assert s == {"x": "x", "groups": "NUM_GROUPS", "eps": "EPS", "w": "weight", "b": "bias", "act": "silu",
                 "params": ["x", "weight", "bias"]}
    _, props = rw.proposals("l2_groupnorm_swish", "fuse_passes")
    src = props[0].source
    assert set(rw.kernel_names(src)) == {"_tdx_gn_partial_kernel", "_tdx_gn_finalize_kernel", "_tdx_gn_norm_kernel"}
    stats = rw.function(src, "_tdx_gn_partial_kernel")
    assert len([n for n in ast.walk(stats) if isinstance(n, ast.For)]) == 1   # one pass for mean and variance
    norm = rw.function(src, "_tdx_gn_norm_kernel")
    assert rw.calls(norm, "tl.sigmoid")                                        # the silu is fused
    assert len(rw.calls(norm, "tl.program_id")) == 2


def test_templates_do_not_misfire(rw):
    for task in ("l2_layernorm", "l2_softmax", "l1_add", "l2_batchnorm"):
        text = rw.task_path(task).read_text()
        assert topk_spec(text) is None and groupnorm_spec(text) is None


def test_batchnorm_inference(rw):
    from tritondx.tools.rewrite.channel_norm_templates import batchnorm_spec

    s = batchnorm_spec(rw.task_path("l2_batchnorm").read_text())
    assert s is not None and (s["mean"], s["var"], s["w"], s["b"], s["eps"]) == \
        ("running_mean", "running_var", "weight", "bias", "EPS")
    _, props = rw.proposals("l2_batchnorm", "fuse_passes", detector="roofline")
    (name,) = rw.kernel_names(props[0].source)
    k = rw.function(props[0].source, name)
    # per-channel values are scalars loaded once per program: only x is loaded per element
    assert sum(1 for c in rw.calls(k, "tl.load") if "offs" in ast.unparse(c.args[0])) == 1


def test_index_copy_rows(rw):
    from tritondx.tools.rewrite.index_templates import scatter_spec

    assert scatter_spec(rw.task_path("l1_scatter").read_text()) == \
        {"x": "x", "idx": "idx", "src": "src", "params": ["x", "src", "idx"]}
    _, props = rw.proposals("l1_scatter", "fuse_passes")
    src = props[0].source
    rows = rw.function(src, "_tdx_scatter_rows_kernel")
    assert len(rw.calls(rows, "tl.store")) == 1 and len(rw.calls(rows, "tl.load")) == 3   # mark, src, x
    for task in ("l1_gather", "l1_index_add"):
        assert scatter_spec(rw.task_path(task).read_text()) is None
