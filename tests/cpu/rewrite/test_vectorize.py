"""vectorize_scalar_loop: per-element loops -> blocks; row loops -> 2-D tiles."""

from __future__ import annotations

import ast


def test_scalar_loops(rw, tmp_path):
    _, props = rw.proposals("scalar_loop_rmsnorm", "vectorize_scalar_loop")
    # motivated by triage's own scalar_loop findings
    assert any(m.startswith("scalar_loop:") for m in props[0].motivated_by)
    src = props[0].source
    k = rw.function(src, "rms_rows_kernel")
    loops = [n for n in ast.walk(k) if isinstance(n, ast.For)]
    assert len(loops) == 2 and all(ast.unparse(lp.iter) == "range(0, N, 1024)" for lp in loops)
    assert len(rw.calls(k, "tl.arange")) == 2 and len(rw.calls(k, "tl.sum")) == 1
    assert all(any(kw.arg == "mask" for kw in c.keywords) for c in rw.calls(k, "tl.load") + rw.calls(k, "tl.store"))
    rw.verify("scalar_loop_rmsnorm", src, tmp_path)


def test_row_loop_tiles(rw):
    _, props = rw.proposals("l2_reduce_sum_mid", "vectorize_scalar_loop")
    src = props[0].source
    k = rw.function(src, "mid_sum_kernel")
    (loop,) = [n for n in ast.walk(k) if isinstance(n, ast.For)]
    assert ast.unparse(loop.iter) == "range(0, R, BLOCK_R)"
    assert "_rows[:, None] * stride_r + cols[None, :]" in ast.unparse(rw.calls(loop, "tl.load")[0].args[0])
    assert [c.keywords[0].value.value for c in rw.calls(loop, "tl.sum")] == [0]
    call = next(n for n in ast.walk(rw.function(src, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["BLOCK_R"] == "32"   # 4096 // BLOCK_C=128


def test_loop_carried_dependence_not_vectorized(rw):
    # the running sum is stored every step: each iteration needs the previous one
    assert rw.proposals("scalar_prefix_sum", "vectorize_scalar_loop")[1] == []
    # maxpool's window loops are static and already work on blocks
    assert rw.proposals("l2_maxpool2d", "vectorize_scalar_loop")[1] == []
