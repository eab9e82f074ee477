"""launch_config: block/warps/stages search that keeps the grid tied to the block."""

from __future__ import annotations

import ast


def _launch(rw, source):
    return rw.function(source, "launch")


def test_literal_block_is_hoisted_with_its_grid(rw, tmp_path):
    _, props = rw.proposals("l2_add_rmsnorm", "launch_config")
    assert props
    # every proposal: each launch's BLOCK keyword is a local name, and the cdiv in its grid uses the same name
    for p in props:
        launch = _launch(rw, p.source)
        for call in [n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]:
            kw = {k.arg: k.value for k in call.keywords}
            assert isinstance(kw["BLOCK"], ast.Name)
            for cd in rw.calls(call.func.slice, "triton.cdiv"):
                assert isinstance(cd.args[1], ast.Name) and cd.args[1].id == kw["BLOCK"].id
    # the dangerous direction: a block smaller than the original literal grid divisor
    small = next(p for p in props if p.params.get("add_kernel", {}).get("BLOCK") == 512)
    rw.verify("l2_add_rmsnorm", small.source, tmp_path)


def test_matmul_tiles_and_defaults(rw):
    _, props = rw.proposals("l3_matmul", "launch_config")
    first = props[0].params["matmul_kernel"]
    assert first == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
    # never a proposal equal to the current configuration with defaults spelled out
    _, flat = rw.proposals("l1_add", "launch_config")
    assert all(p.params["add_kernel"] != {"BLOCK": 1024, "num_warps": 4} for p in flat)


def test_grid_it_cannot_follow_is_left_alone(rw):
    _, props = rw.proposals("grid_literal", "launch_config")
    assert props == []
    # no motivating finding: no proposal either
    ctx = rw.make_context("l1_sqrt")
    ctx.findings = [f for f in ctx.findings if "launch_config" not in f.suggests]
    assert rw.CATALOG["launch_config"].fn(ctx) == []


def test_literal_tied_elsewhere_is_not_tuned(rw):
    """After mask_removal the launcher computes EVEN from the literal block: tuning it would break EVEN."""
    from tritondx.tools.task.spec import parse_task_source

    ctx, props = rw.proposals("l2_softmax", "mask_removal")
    assert "N % 1024 == 0" in props[0].source
    ctx.spec = parse_task_source(props[0].source, ctx.spec.path)
    assert rw.CATALOG["launch_config"].fn(ctx) == []


def test_lambda_grid_and_literal_options(rw):
    _, props = rw.proposals("lambda_grid", "launch_config")
    assert props
    p = props[0]
    assert p.params == {"scale_kernel": {"BLOCK": 1024, "num_warps": 4}}
    call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    kw = {k.arg: ast.unparse(k.value) for k in call.keywords}
    assert kw["num_warps"] == "4" and kw["BLOCK"] == "BLOCK"
    assert "BLOCK = 1024" in ast.unparse(rw.function(p.source, "launch"))
