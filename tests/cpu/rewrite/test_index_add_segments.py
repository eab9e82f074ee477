"""fuse_passes index_add template: segment sums over a counting sort instead of one float atomic per element."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.index_templates import index_add_spec


def test_index_add_segments(rw, tmp_path):
    assert index_add_spec(rw.task_path("l1_index_add").read_text()) == ("x", "src", "idx")
    _, props = rw.proposals("l1_index_add", "fuse_passes", detector="atomics_in_hot_path")
    ia = [p for p in props if p.params.get("template") == "index_add_segments"]
    assert len(ia) == 2
    src = ia[0].source
    seg = rw.function(src, "_tdx_ia_segment_kernel")
    # the float data is never touched by an atomic; only the int32 histogram/cursor are
    assert not rw.calls(seg, "tl.atomic_add") and len(rw.calls(seg, "tl.store")) == 1
    launch = ast.unparse(rw.function(src, "launch"))
    assert ".clone()" not in launch
    rw.verify("l1_index_add", src, tmp_path)


def test_index_add_spec_only_on_index_add(rw):
    for task in ("l1_scatter", "l1_gather", "l2_cumsum"):
        assert index_add_spec(rw.task_path(task).read_text()) is None
