"""tile_2d: a naive transpose (one program per row, a 1-D block along it) made into 2-D tiles; the
uncoalesced_access finding of its store is gone from the candidate's IR (compiled for cuda:90 on CPU)."""

from __future__ import annotations

import ast

import pytest
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.tile_2d import tile_source




def _round(rw, tmp_path):
    before = rw.ir_findings(rw.task_path("tile_2d"), tmp_path / "before")
    motivating = [f for f in before if f.detector == "uncoalesced_access"]
    props = [p for p in propose(rw.context_from("tile_2d", before), limit=8) if p.family == "tile_2d"]
    return motivating, props


@pytest.mark.slow
def test_transpose_tiled_and_finding_gone(rw, tmp_path):
    motivating, props = _round(rw, tmp_path)
    assert motivating and "STORE-T" in motivating[0].source_text
    assert "tile_2d" in motivating[0].suggests
    assert props, "tile_2d not proposed for the naive transpose"
    for i, p in enumerate(props):
        assert set(p.motivated_by) & {f.id for f in motivating}
        rw.verify("tile_2d", p.source, tmp_path, f"cand{i}")
        cand = tmp_path / f"cand{i}.py"
        after = rw.ir_findings(cand, tmp_path / f"after{i}")
        assert not [f for f in after if f.detector == "uncoalesced_access"], [f.message for f in after]


def test_transpose_rewrite_shape(rw):
    src, what = tile_source(rw.task_path("tile_2d").read_text(), "row_transpose_kernel", 64, 64)
    k = rw.function(src, "row_transpose_kernel")
    assert [a.arg for a in k.args.args][-3:] == ["TDX_ROWS", "TDX_BLOCK_R", "TDX_BLOCK_C"]
    assert ast.unparse(k.body[0].value) == "(tl.program_id(0) * TDX_BLOCK_R + tl.arange(0, TDX_BLOCK_R))[:, None]"
    (store,) = rw.calls(k, "tl.store")
    assert ast.unparse(store.keywords[0].value) == "mask & _tdx_rows_ok"
    call = next(n for n in ast.walk(rw.function(src, "_transpose")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))    # the launch one call below launch()
    assert ast.unparse(call.func.slice).startswith("(triton.cdiv(M, 64), triton.cdiv(triton.next_power_of_2(N)")
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["TDX_ROWS"] == "M"


def test_reduction_kernel_not_tiled(rw):
    # the per-column sum would mix the rows of a tile: no proposal even when the finding is there
    _, props = rw.proposals("row_softmax_like", "tile_2d", detector="uncoalesced_access")
    assert props == []
    assert tile_source(rw.task_path("row_softmax_like").read_text(), "col_norm_kernel", 64, 64) is None
