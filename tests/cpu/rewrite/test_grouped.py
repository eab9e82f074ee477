"""grouped_ordering: GROUP_M swizzle; a 2-D grid becomes 1-D."""

from __future__ import annotations

import ast


def test_two_d_grid_becomes_grouped(rw, tmp_path):
    _, props = rw.proposals("l3_skinny_gemm", "grouped_ordering")
    assert props
    src = props[0].source
    k = rw.function(src, "matmul_kernel")
    assert [a.arg for a in k.args.args][-1] == "GROUP_M"
    assert [c.args[0].value for c in rw.calls(k, "tl.program_id")] == [0]   # axis 1 is gone
    launch = rw.function(src, "launch")
    grid = next(n.value for n in ast.walk(launch) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "grid")
    assert isinstance(grid, ast.Tuple) and len(grid.elts) == 1
    call = next(n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript))
    assert {k.arg: ast.unparse(k.value) for k in call.keywords}["GROUP_M"] == "8"
    rw.verify("l3_skinny_gemm", src, tmp_path)


def test_row_major_and_batched(rw):
    for task in ("l3_matmul", "l3_batched_matmul", "l3_grouped_matmul", "l3_quant_matmul"):
        _, props = rw.proposals(task, "grouped_ordering")
        assert props, task
        assert any(c.func.attr == "minimum" for c in ast.walk(rw.tree(props[0].source))
                   if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute))
    # the batched kernel keeps its batch axis
    _, props = rw.proposals("l3_batched_matmul", "grouped_ordering")
    k = rw.function(props[0].source, "bmm_kernel")
    assert sorted(c.args[0].value for c in rw.calls(k, "tl.program_id")) == [0, 1]


def test_not_a_gemm_grid(rw):
    # scores kernel: a third (head) axis and BLOCK_K missing; gemv: no M/N tiles; elementwise: nothing
    for task in ("l3_attention", "l3_gemv", "l1_add", "l2_swiglu"):
        assert rw.proposals(task, "grouped_ordering")[1] == [], task
