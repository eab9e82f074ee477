"""fuse_passes max_pool2d template: 2-D output tiles per plane, no div/mod per output element."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.maxpool_template import maxpool2d_spec


def test_maxpool_tiles(rw, tmp_path):
    assert maxpool2d_spec(rw.task_path("l2_maxpool2d").read_text()) == \
        {"x": "x", "kh": 3, "kw": 3, "sh": 2, "sw": 2, "ph": 1, "pw": 1}
    _, props = rw.proposals("l2_maxpool2d", "fuse_passes", detector="roofline")
    mp = [p for p in props if p.params.get("template") == "maxpool2d_tiles"]
    assert len(mp) == 2
    src = mp[0].source
    kern = rw.function(src, "_tdx_maxpool2d_tile_kernel")
    text = ast.unparse(kern)
    assert "offs % OW" not in text and "offs // OW" not in text
    assert len(rw.calls(kern, "tl.program_id")) == 3
    rw.verify("l2_maxpool2d", src, tmp_path)


def test_maxpool_spec_only_on_max_pool(rw):
    for task in ("l2_avgpool2d", "l2_softmax", "l1_add"):
        assert maxpool2d_spec(rw.task_path(task).read_text()) is None
