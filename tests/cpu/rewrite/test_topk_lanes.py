"""fuse_passes top-k: the per-lane single-pass template (no reduction in the main loop)."""

from __future__ import annotations

import ast


def test_topk_lanes_template(rw, tmp_path):
    _, props = rw.proposals("l3_topk", "fuse_passes", detector="roofline")
    lanes = [p for p in props if p.params["template"] == "topk_lanes"]
    assert [(p.params["lanes"], p.params["num_warps"]) for p in lanes] == [(256, 4), (256, 8), (128, 4), (512, 4)]
    assert props[0].params["template"] == "topk_lanes"   # tried before the chunked merge (slower on the H200)
    src = lanes[0].source
    (name,) = rw.kernel_names(src)
    kern = rw.function(src, name)
    loop = next(n for n in ast.walk(kern) if isinstance(n, ast.For) and "range(0, N, LANES)" in ast.unparse(n.iter))
    # the row is loaded once, in one loop, and that loop reduces nothing
    assert len(rw.calls(kern, "tl.load")) == 1 and len(rw.calls(loop, "tl.load")) == 1
    assert not rw.calls(loop, "tl.max") and not rw.calls(loop, "tl.min")
    rw.verify("l3_topk", src, tmp_path)
    rw.verify("l3_topk", lanes[2].source, tmp_path, label="lanes128")  # one lane per thread
