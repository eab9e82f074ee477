"""autotune: a fixed configuration becomes @triton.autotune for tasks with varying shapes."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.autotune import single_config_variants


def _decorator(fn: ast.FunctionDef) -> ast.Call:
    return next(d for d in fn.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func) == "triton.autotune")


def test_autotune_gather(rw, tmp_path):
    # motivated by triage's own "fixed_launch_config" finding; no synthetic evidence needed
    ctx = rw.make_context("l1_gather")
    props = rw.CATALOG["autotune"].fn(ctx)
    (p,) = props
    assert any(m.startswith("fixed_launch_config:") for m in p.motivated_by)
    k = rw.function(p.source, "gather_rows_kernel")
    deco = _decorator(k)
    kw = {x.arg: x.value for x in deco.keywords}
    # D (the row width) is an argument; the row count T only sizes the grid: keyed on its power-of-two bucket
    # (an extra argument), else the configuration tuned for the first T would serve every later T
    assert ast.literal_eval(kw["key"]) == ["D", "grid0_bucket"]
    assert ast.unparse(k.args.args[-1]) == "grid0_bucket"
    configs = kw["configs"].elts
    assert 2 <= len(configs) <= 6 and ast.unparse(configs[0]).startswith("triton.Config({'BLOCK': 256}")
    call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert "BLOCK" not in {x.arg for x in call.keywords}
    kws = {x.arg: ast.unparse(x.value) for x in call.keywords}
    grid = call.func.slice.body if isinstance(call.func.slice, ast.Lambda) else call.func.slice
    assert kws["grid0_bucket"] == f"triton.next_power_of_2({ast.unparse(grid.elts[0])})" == "triton.next_power_of_2(M)"
    # the interpreter cannot time: check one configuration other than the original one
    variants = single_config_variants(p.source)
    assert len(variants) == len(configs)
    rw.verify("l1_gather", variants[1], tmp_path)


def test_grid_becomes_lambda(rw):
    _, props = rw.proposals("l2_swiglu", "autotune")
    launch = rw.function(props[0].source, "launch")
    call = next(n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript))
    assert ast.unparse(call.func.slice) == "lambda META: (M, triton.cdiv(N, META['BLOCK']))"
    # skinny GEMM: BLOCK_M stays computed by the launcher, N/K tiles are tuned
    _, props = rw.proposals("l3_skinny_gemm", "autotune")
    deco = _decorator(rw.function(props[0].source, "matmul_kernel"))
    assert all("BLOCK_M" not in ast.unparse(c) for c in deco.keywords[0].value.elts)


def test_static_shapes_not_autotuned(rw):
    # not DYNAMIC: one launch configuration is enough (launch_config searches it offline)
    assert rw.proposals("l1_add", "autotune")[1] == []
    assert rw.proposals("l2_layernorm", "autotune")[1] == []


def test_block_feeding_other_launch_values_not_autotuned(rw):
    """An EVEN flag computed from the launcher's BLOCK must keep matching the BLOCK the kernel gets."""
    from tritondx.tools.task.spec import parse_task_source

    ctx, props = rw.proposals("l2_swiglu", "mask_removal")
    ctx.spec = parse_task_source(props[0].source, ctx.spec.path)
    ctx.findings = rw.make_context("l2_swiglu", ["autotune"]).findings
    assert rw.CATALOG["autotune"].fn(ctx) == []


def test_grid_size_passed_as_argument_needs_no_bucket(rw):
    # l2_swiglu's grid (M, cdiv(N, BLOCK)): M is no argument -> bucketed; the GEMM's grid sizes cdiv(M, BLOCK_M) ...
    # come from its arguments M, N, K, already in the key
    _, props = rw.proposals("l2_swiglu", "autotune")
    key = lambda src, k: ast.literal_eval(next(x.value for x in _decorator(rw.function(src, k)).keywords
                                               if x.arg == "key"))
    assert key(props[0].source, "swiglu_kernel") == ["N", "grid0_bucket"]
    _, props = rw.proposals("l3_skinny_gemm", "autotune")
    assert key(props[0].source, "matmul_kernel") == ["M", "N", "K"] and "_bucket" not in props[0].source
