"""pipelining: tl.range(num_stages=...), num_stages on dot kernels, hoisted pointer blocks."""

from __future__ import annotations

import ast


def _for_loops(fn):
    return [n for n in ast.walk(fn) if isinstance(n, ast.For)]


def test_matmul_k_loop(rw, tmp_path):
    _, props = rw.proposals("l3_matmul", "pipelining", detector="unpipelined_loop")
    p = next(p for p in props if p.params == {"num_stages": 4, "hoist": True, "kernels": ["matmul_kernel"]})
    k = rw.function(p.source, "matmul_kernel")
    (loop,) = _for_loops(k)
    assert ast.unparse(loop.iter) == "tl.range(0, K, BLOCK_K, num_stages=4)"
    # loads use pointer blocks built before the loop and advanced at its end
    assert [ast.unparse(c.args[0]) for c in rw.calls(loop, "tl.load")] == ["a_ptrs", "b_ptrs"]
    assert [ast.unparse(s) for s in loop.body[-2:]] == ["a_ptrs += BLOCK_K * stride_ak", "b_ptrs += BLOCK_K * stride_bk"]
    call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["num_stages"] == "4"
    rw.verify("l3_matmul", p.source, tmp_path)


def test_row_loops_are_staged(rw):
    _, props = rw.proposals("l2_layernorm", "pipelining")
    k = rw.function(props[0].source, "layernorm_kernel")
    assert all(ast.unparse(lp.iter).startswith("tl.range(") for lp in _for_loops(k))


def test_unsafe_loops_left_alone(rw):
    # add_layernorm reloads h, which it stores itself: a prefetch could read a stale value
    _, props = rw.proposals("l2_add_layernorm", "pipelining")
    for p in props:
        k = rw.function(p.source, "add_layernorm_kernel")
        for lp in _for_loops(k):
            if any("h_ptr" in ast.unparse(c.args[0]) for c in rw.calls(lp, "tl.load")):
                assert ast.unparse(lp.iter).startswith("range(")
    # nothing to pipeline: no loops
    assert rw.proposals("l1_add", "pipelining")[1] == []
    # static (unrolled) window loops of maxpool
    assert rw.proposals("l2_maxpool2d", "pipelining")[1] == []
