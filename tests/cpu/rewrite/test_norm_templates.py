"""fuse_passes norm templates: matched on the reference, one pass over the row."""

from __future__ import annotations

import ast

import pytest
from tritondx.tools.rewrite.norm_templates import norm_code, norm_spec
from tritondx.tools.rewrite.taskinfo import task_info
from tritondx.tools.rewrite.templates import apply_template


def _loops(fn: ast.FunctionDef) -> int:
    return sum(isinstance(n, ast.For) for n in ast.walk(fn))


@pytest.mark.parametrize("task,kind,residual,outputs", [
    ("l2_layernorm", "layer", None, ["out"]),
    ("l2_rmsnorm", "rms", None, ["out"]),
    ("l2_add_rmsnorm", "rms", "residual", ["out", "h"]),
    ("l2_add_layernorm", "layer", "residual", ["out", "h"]),
])
def test_spec_from_reference(rw, task, kind, residual, outputs):
    s = norm_spec(rw.task_path(task).read_text())
    assert s is not None and s.kind == kind and s.residual == residual and s.outputs == outputs
    assert s.eps == "EPS" and s.weight == "weight"
    assert s.bias == ("bias" if kind == "layer" else None)


def test_add_rmsnorm_fused_and_correct(rw, tmp_path):
    _, props = rw.proposals("l2_add_rmsnorm", "fuse_passes")
    assert props and all(p.params["template"] == "add_rmsnorm" for p in props)
    src = props[0].source
    # one kernel launch per call instead of two, and the row kernel has no loop
    assert set(rw.kernel_names(src)) == {"_tdx_rmsnorm_rows_kernel", "_tdx_rmsnorm_loop_kernel"}
    assert _loops(rw.function(src, "_tdx_rmsnorm_rows_kernel")) == 0
    assert len(rw.calls(rw.function(src, "_tdx_rmsnorm_rows_kernel"), "tl.load")) == 3  # x, residual, weight
    assert any(m.startswith("multiple_launches:") for m in props[0].motivated_by)
    assert any(m.startswith("multi_pass_loops:") for m in props[0].motivated_by)
    rw.verify("l2_add_rmsnorm", src, tmp_path)


def test_layernorm_loop_path_correct(rw, tmp_path):
    """The long-row kernel (one-pass Chan statistics) forced on the check shapes."""
    source = rw.task_path("l2_add_layernorm").read_text()
    code = norm_code(norm_spec(source), task_info(source).launch_params(), max_fused=256)
    names = set(rw.kernel_names(source))
    src = apply_template(source, names, code)
    assert _loops(rw.function(src, "_tdx_layernorm_loop_kernel")) == 2
    rw.verify("l2_add_layernorm", src, tmp_path)


def test_not_a_norm(rw):
    # softmax and quantize are multi-pass too, but their references are not norms
    for task in ("l2_softmax", "l2_quantize", "l2_groupnorm_swish"):
        assert norm_spec(rw.task_path(task).read_text()) is None
    _, props = rw.proposals("l2_quantize", "fuse_passes")
    assert not any(str(p.params.get("template", "")).endswith("norm") for p in props)
