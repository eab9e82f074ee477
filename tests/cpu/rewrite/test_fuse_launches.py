"""fuse_launches: kernels chained through a temporary become one kernel."""

from __future__ import annotations

import ast


def _launches(rw, source):
    launch = rw.function(source, "launch")
    return [n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]


def test_flat_chain(rw, tmp_path):
    _, props = rw.proposals("l1_addcmul", "fuse_launches")
    assert len(props) == 1
    src = props[0].source
    assert len(_launches(rw, src)) == 1 and len(rw.kernel_names(src)) == 1
    fused = rw.function(src, rw.kernel_names(src)[0])
    # the temporary is never stored nor loaded any more: 3 loads (x, t1, t2) and 1 store
    assert len(rw.calls(fused, "tl.load")) == 3 and len(rw.calls(fused, "tl.store")) == 1
    rw.verify("l1_addcmul", src, tmp_path)


def test_matmul_epilogue(rw, tmp_path):
    _, props = rw.proposals("l3_matmul_bias_gelu", "fuse_launches")
    assert props and props[0].params["chains"][0][0] == "epilogue"
    src = props[0].source
    (name,) = rw.kernel_names(src)
    fused = rw.function(src, name)
    assert rw.calls(fused, "tl.dot") and rw.calls(fused, "tl.erf")
    assert len(rw.calls(fused, "tl.store")) == 1 and len(_launches(rw, src)) == 1
    rw.verify("l3_matmul_bias_gelu", src, tmp_path)


def test_matmul_prologue_structure(rw):
    _, props = rw.proposals("l3_quant_matmul", "fuse_launches")
    assert props and props[0].params["chains"][0][0] == "prologue"
    src = props[0].source
    (name,) = rw.kernel_names(src)
    fused = rw.function(src, name)
    loop = next(n for n in ast.walk(fused) if isinstance(n, ast.For))
    # the int8 weight is loaded and dequantized inside the K loop, right before the dot
    loads = [ast.unparse(c.args[0]) for c in rw.calls(loop, "tl.load")]
    assert any(a.startswith("wq_ptr") for a in loads) and not any(a.startswith("b_ptr") for a in loads)
    assert rw.calls(loop, "tl.dot")


def test_no_chain_no_proposal(rw):
    # h is returned by the task: the temporary is an output, not something to drop
    assert rw.proposals("l2_add_rmsnorm", "fuse_launches")[1] == []
    # two kernels writing the same output (zero fill + diagonal): no producer/consumer chain
    assert rw.proposals("l1_eye", "fuse_launches")[1] == []
    # statistics read per group, not per element: not a flat chain
    assert rw.proposals("l2_groupnorm_swish", "fuse_launches")[1] == []


def test_a_chain_in_a_helper(rw, tmp_path):
    """Both launches in a helper that launch() calls (real libraries wrap their kernels): fused there."""
    from tritondx.tools.rewrite.base import RewriteContext
    from tritondx.tools.rewrite.fuse_launches import fuse_launches
    from tritondx.tools.task.spec import parse_task_source
    src = rw.task_path("l1_addcmul").read_text()
    head, rest = src.split("def launch(x, t1, t2):\n", 1)
    body, tail = rest.split("\n\ndef reference", 1)
    src = (head + "def launch(x, t1, t2):\n    return _addcmul(x, t1, t2)\n\n\ndef _addcmul(x, t1, t2):\n" + body
           + "\n\ndef reference" + tail)
    task = tmp_path / "helper_task.py"
    task.write_text(src)
    ctx = rw.make_context(str(task), ["fuse_launches"])
    (p,) = fuse_launches(ctx)
    parse_task_source(p.source, "candidate.py")
    helper = rw.function(p.source, "_addcmul")
    assert len([n for n in ast.walk(helper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]) == 1
    assert len(rw.kernel_names(p.source)) == 1
    rw.verify(str(task), p.source, tmp_path)
