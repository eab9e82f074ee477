"""fuse_passes, structural: multi-pass row kernels read each row once when it fits in registers."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.row_resident import row_resident_source


def test_quantize_single_read(rw, tmp_path):
    # no reference template knows a per-row absmax int8 quantizer: the structural rewrite takes it
    _, props = rw.proposals("l2_quantize", "fuse_passes")
    p = next(p for p in props if p.params["template"] == "row_resident" and p.params["max_row"] == 16384)
    assert any(m.startswith("multi_pass_loops:") for m in p.motivated_by)
    row = rw.function(p.source, "quantize_kernel_row")
    assert not [n for n in ast.walk(row) if isinstance(n, ast.For)]
    assert len(rw.calls(row, "tl.load")) == 1          # two passes read x once
    launch = rw.function(p.source, "launch")
    (branch,) = [n for n in ast.walk(launch) if isinstance(n, ast.If)]
    assert ast.unparse(branch.test) == "_row_block <= 16384"
    assert "quantize_kernel[" in ast.unparse(branch.orelse[0])   # long rows keep the two-pass kernel
    rw.verify("l2_quantize", p.source, tmp_path)


def test_store_between_passes_blocks_reuse(rw):
    # add_layernorm stores h in pass 1 and reads it in passes 2 and 3: the pass-2 read must stay
    src, done = row_resident_source(rw.task_path("l2_add_layernorm").read_text(), 16384)
    assert done == ["add_layernorm_kernel"]
    row = rw.function(src, "add_layernorm_kernel_row")
    loads = [ast.unparse(c.args[0]) for c in rw.calls(row, "tl.load")]
    assert sum(a.startswith("h_ptr") for a in loads) == 1 and len(loads) == 5   # x, r, h (once), w, b


def test_templates_first_and_single_pass_kernels_untouched(rw):
    _, props = rw.proposals("l2_layernorm", "fuse_passes")
    assert {p.params["template"] for p in props} == {"layernorm"}
    for task in ("l2_reduce_sum_last", "l2_cumsum", "l1_gather"):
        assert row_resident_source(rw.task_path(task).read_text(), 16384)[1] == []


def test_fuse_passes_nothing_to_fuse(rw):
    # one pass already (a row sum), and an elementwise map: no template, no multi-pass loops
    assert rw.proposals("l2_reduce_sum_last", "fuse_passes")[1] == []
    assert rw.proposals("l1_add", "fuse_passes")[1] == []


def test_a_launch_in_a_helper_with_its_block_by_position(rw, tmp_path):
    """Real launchers wrap their kernels (launch() -> a library function -> kernel[grid]): the branch goes where
    the call is, and a block passed by position becomes the row's block in its place (a keyword as well would be
    two values for one parameter)."""
    src = rw.task_path("l2_quantize").read_text()
    old = "    quantize_kernel[(M,)](x, q, scale, N, x.stride(0), q.stride(0), BLOCK=1024)\n    return q, scale\n"
    assert old in src
    src = src.replace(old, "    _quantize(x, q, scale, M, N, 1024)\n    return q, scale\n\n\n"
                           "def _quantize(x, q, scale, M, N, block):\n"
                           "    quantize_kernel[(M,)](x, q, scale, N, x.stride(0), q.stride(0), block)\n")
    out, done = row_resident_source(src, 16384)
    assert done == ["quantize_kernel"]
    helper = rw.function(out, "_quantize")
    (branch,) = [n for n in ast.walk(helper) if isinstance(n, ast.If)]
    (row_call,) = [c for c in ast.walk(branch.body[0]) if isinstance(c, ast.Call)
                   and ast.unparse(c.func).startswith("quantize_kernel_row[")]
    assert ast.unparse(row_call.args[-1]) == "_row_block" and {k.arg for k in row_call.keywords} == {"num_warps"}
    assert "quantize_kernel[" in ast.unparse(branch.orelse[0])
    assert not [n for n in ast.walk(rw.function(out, "launch")) if isinstance(n, ast.If)]
    task = tmp_path / "helper_task.py"
    task.write_text(src)
    rw.verify(str(task), out, tmp_path)
