"""persistent: programs loop over the tiles; the launcher sizes the grid from the SM count."""

from __future__ import annotations

import ast


def test_tiles_loop(rw, tmp_path):
    _, props = rw.proposals("add_tiny_block", "persistent", detector="tail_effect")
    p = props[0]
    k = rw.function(p.source, "axpy_kernel")
    (loop,) = [s for s in k.body if isinstance(s, ast.For)]
    assert ast.unparse(loop.iter) == "range(tl.program_id(0), NUM_TILES, NUM_PROGS)"
    assert [a.arg for a in k.args.args][-2:] == ["NUM_TILES", "NUM_PROGS"]
    helper = rw.function(p.source, "_tdx_num_sms")
    assert "multi_processor_count" in ast.unparse(helper)
    launch = ast.unparse(rw.function(p.source, "launch"))
    assert "axpy_kernel[_progs,]" in launch.replace("(", "").replace(")", "") or "axpy_kernel[(_progs,)]" in launch
    # under the interpreter 4 programs walk all tiles: the loop itself is what gets checked
    rw.verify("add_tiny_block", p.source, tmp_path)


def test_matmul_one_program_per_sm(rw):
    _, props = rw.proposals("l3_matmul", "persistent")
    assert props[0].params == {"per_sm": {"matmul_kernel": 1}}


def test_not_persistent(rw):
    # a 2-D grid, and a kernel that advances its pointer parameters (state that would leak across tiles)
    for task in ("l2_swiglu", "l3_batched_matmul", "l2_reduce_sum_mid"):
        assert rw.proposals(task, "persistent")[1] == [], task
    # attention: only the 1-D softmax launch qualifies; the (m, n, head) grids stay as they are
    _, props = rw.proposals("l3_attention", "persistent")
    assert all(p.params["per_sm"].keys() == {"softmax_kernel"} for p in props)


def test_grouped_gemm_single_launch(rw, tmp_path):
    """The per-group launch loop of a grouped GEMM becomes one launch over every group's tiles."""
    from tritondx.tools.rewrite.matmul_templates import grouped_gemm_spec

    assert grouped_gemm_spec(rw.task_path("l3_grouped_matmul").read_text()) == ("x", "w", "group_sizes")
    _, props = rw.proposals("l3_grouped_matmul", "persistent", detector="grid_too_small")
    p = next(p for p in props if p.params.get("template") == "grouped_gemm")
    launch = rw.function(p.source, "launch")
    assert not [n for n in ast.walk(launch) if isinstance(n, ast.For)]       # no per-group loop of launches
    assert len([n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]) == 1
    # the group sizes stay on the device: the grid is bounded from the shapes (no host read, no sync)
    assert not [n for n in ast.walk(launch) if isinstance(n, ast.Attribute) and n.attr in ("tolist", "item", "cpu")]
    rw.verify("l3_grouped_matmul", p.source, tmp_path)
    for task in ("l3_matmul", "l3_batched_matmul", "l1_add"):
        assert grouped_gemm_spec(rw.task_path(task).read_text()) is None
