"""alignment_hints: tl.multiple_of / tl.max_contiguous where the offsets start on a block multiple."""

from __future__ import annotations

import ast


def _hinted(src, kernel):
    return [ast.unparse(n.targets[0]) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "tl.max_contiguous"]


def test_flat_offsets(rw, tmp_path):
    _, props = rw.proposals("l1_add", "alignment_hints", detector="non_vectorized_global_access")
    (p,) = props
    (assign,) = [n for n in ast.walk(rw.function(p.source, "add_kernel")) if isinstance(n, ast.Assign)
                 and ast.unparse(n.targets[0]) == "offs"]
    assert ast.unparse(assign.value) == \
        "tl.max_contiguous(tl.multiple_of(pid * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)"
    rw.verify("l1_add", p.source, tmp_path)


def test_loop_and_tile_offsets(rw):
    _, props = rw.proposals("l3_matmul", "alignment_hints", detector="coalesce_layout")
    assert sorted(_hinted(props[0].source, "matmul_kernel")) == ["rk", "rm", "rn"]


def test_unaligned_start_not_hinted(rw):
    assert rw.proposals("shifted_diff", "alignment_hints")[1] == []
