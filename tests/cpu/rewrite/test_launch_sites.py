"""Launches below launch(): found through helpers, each launch value set where it is defined, candidates
interpreter-correct (kernels written for these tests, under tests/cpu/rewrite/kernels/launch_*.py)."""

from __future__ import annotations

import ast

import pytest
from tritondx.tools.rewrite.launch_edit import EditRefused, set_values
from tritondx.tools.rewrite.launches import analyze


def _src(rw, name):
    return rw.task_path(name).read_text()


def _assign(fn: ast.FunctionDef, name: str) -> ast.expr | None:
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return n.value
    return None


def _call_kw(source: str, fn_name: str, keyword: str, kernel: str | None = None) -> ast.expr | None:
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == fn_name)
    for c in ast.walk(fn):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript) and \
                (kernel is None or ast.unparse(c.func.value) == kernel):
            for k in c.keywords:
                if k.arg == keyword:
                    return k.value
    return None


def test_launch_found_through_two_helper_levels(rw, tmp_path):
    src = _src(rw, "launch_two_levels")
    (site,) = analyze(src).sites
    assert site.kernel == "scale_kernel" and site.function == "_scale_into"
    assert [p.split("@")[0] for p in site.path] == ["launch", "scale", "_scale_into"]
    block = site.params["BLOCK"]
    assert (block.kind, block.function, block.value, block.grid_tied) == ("local", "_scale_into", 256, True)
    assert site.params["num_warps"].kind == "literal" and site.params["num_warps"].value == 2

    _, props = rw.proposals("launch_two_levels", "launch_config")
    assert props, "a launch two calls below launch() must get candidates"
    small = next(p for p in props if p.params["scale_kernel"]["BLOCK"] == 512)
    helper = rw.function(small.source, "_scale_into")
    assert ast.unparse(_assign(helper, "BLOCK")) == "512"        # edited where it is defined
    assert ast.unparse(_call_kw(small.source, "_scale_into", "num_warps")) == "4"
    # 512 < 1000 and 4097: the grid must have followed the block or elements are left unwritten
    rw.verify("launch_two_levels", small.source, tmp_path)


def test_signature_default_gemm_tiles_retiled(rw, tmp_path):
    src = _src(rw, "launch_sgemm_defaults")
    (site,) = analyze(src).sites
    for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        d = site.params[p]
        assert (d.kind, d.function, d.value, d.editable) == ("signature_default", "sgemm", 32, True)

    _, props = rw.proposals("launch_sgemm_defaults", "launch_config", detector="mma_v2_not_wgmma")
    first = props[0]
    assert first.params["sgemm_kernel"] == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8,
                                            "num_stages": 3}
    sgemm = rw.function(first.source, "sgemm")
    defaults = {a.arg: ast.unparse(d) for a, d in zip(sgemm.args.args[-3:], sgemm.args.defaults)}
    assert defaults == {"BLOCK_M": "128", "BLOCK_N": "128", "BLOCK_K": "64"}
    assert ast.unparse(_call_kw(first.source, "sgemm", "BLOCK_M")) == "BLOCK_M"   # the call still passes the param
    rw.verify("launch_sgemm_defaults", first.source, tmp_path)


def test_module_constant_shared_by_two_launches_is_forked(rw, tmp_path):
    src = _src(rw, "launch_meta_constant")
    a = analyze(src)
    scale, shift = a.for_kernel("scale_kernel")[0], a.for_kernel("shift_kernel")[0]
    assert scale.grid.kind == "lambda" and scale.grid.meta_keys == ["BLOCK"]
    assert scale.params["BLOCK"].kind == "module_constant"
    assert any(s.startswith("shift_kernel") for s in scale.params["BLOCK"].shared_with)
    assert shift.params["BLOCK"].grid_tied

    # only scale_kernel changes: the shared constant stays, scale_kernel gets its own local
    one = set_values(src, {"scale_kernel": {"BLOCK": 128}})
    consts = {t.id: ast.unparse(n.value) for n in ast.parse(one).body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name)}
    assert consts["BLOCK_SIZE"] == "512"
    fork = _call_kw(one, "scale_shift", "BLOCK")
    assert isinstance(fork, ast.Name) and fork.id != "BLOCK_SIZE"
    assert ast.unparse(_assign(rw.function(one, "scale_shift"), fork.id)) == "128"
    assert analyze(one).for_kernel("shift_kernel")[0].params["BLOCK"].value == 512
    rw.verify("launch_meta_constant", one, tmp_path, "fork")

    # both change together: the constant itself is edited (shift_kernel's tuple grid reads it too)
    both = set_values(src, {"scale_kernel": {"BLOCK": 128}, "shift_kernel": {"BLOCK": 128}})
    assert "BLOCK_SIZE = 128" in both and "BLOCK_SIZE_2" not in both
    rw.verify("launch_meta_constant", both, tmp_path, "both")


def test_calculate_settings_helpers(rw, tmp_path):
    src = _src(rw, "launch_settings_helper")
    a = analyze(src)
    row, soft = a.for_kernel("row_sum_kernel")[0], a.for_kernel("softmax_kernel")[0]
    assert (row.params["BLOCK"].kind, row.params["BLOCK"].function) == ("helper_return", "loop_settings")
    assert soft.params["BLOCK"].kind == "computed"       # next_power_of_2(n): the row must fit, never tuned
    assert soft.params["num_warps"].kind == "computed"   # assigned on two paths in the helper

    _, props = rw.proposals("launch_settings_helper", "launch_config")
    p = next(p for p in props if p.params.get("row_sum_kernel", {}).get("BLOCK", 128) != 128
             and "softmax_kernel" in p.params)
    assert set(p.params["softmax_kernel"]) == {"num_warps"}
    helper = rw.function(p.source, "loop_settings")
    assert ast.unparse(_assign(helper, "BLOCK")) == str(p.params["row_sum_kernel"]["BLOCK"])
    # the computed warps are overridden at the call; the helper that computes them is left as it is
    warps = _call_kw(p.source, "row_stats", "num_warps", "softmax_kernel")
    assert ast.unparse(warps) == str(p.params["softmax_kernel"]["num_warps"])
    assert ast.unparse(rw.function(p.source, "calculate_settings")) == ast.unparse(
        rw.function(src, "calculate_settings"))
    rw.verify("launch_settings_helper", p.source, tmp_path)


def test_autotuned_kernel_pinned_to_one_config(rw, tmp_path):
    src = _src(rw, "launch_autotuned")
    (site,) = analyze(src).sites
    assert site.autotuned and site.autotune_configs == [{"BLOCK": 128, "num_warps": 2}, {"BLOCK": 256, "num_warps": 4}]
    assert site.params["BLOCK"].kind == "autotune_config" and site.params["BLOCK"].values == [128, 256]

    _, props = rw.proposals("launch_autotuned", "launch_config")
    p = next(p for p in props if p.params["scale_kernel"]["BLOCK"] == 2048)
    deco = next(d for d in rw.function(p.source, "scale_kernel").decorator_list if "autotune" in ast.unparse(d))
    configs = next(k.value for k in deco.keywords if k.arg == "configs")
    assert [ast.unparse(c) for c in configs.elts] == [
        f"triton.Config({{'BLOCK': 2048}}, num_warps={p.params['scale_kernel']['num_warps']})"]
    rw.verify("launch_autotuned", p.source, tmp_path)


def test_an_autotuner_whose_configs_are_a_comprehension_is_read_and_pinned_like_a_list(rw):
    """FLA writes ``configs=[triton.Config({...}, num_warps=w) for ... in [...]]``: the launch analysis reads those
    values (not "unset") and an edit pins the decorator to one config, as for a literal list."""
    literal = ('configs=[triton.Config({"BLOCK": 128}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)]')
    src = _src(rw, "launch_autotuned")
    assert literal in src
    src = src.replace(literal, 'configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in [(128, 2)] + PAIRS]')
    src = src.replace("\n\n@triton.autotune", "\nPAIRS = [(256, 4)]\n\n\n@triton.autotune", 1)
    (site,) = analyze(src).sites
    assert site.autotuned and site.autotune_configs == [{"BLOCK": 128, "num_warps": 2}, {"BLOCK": 256, "num_warps": 4}]
    assert site.params["BLOCK"].kind == "autotune_config" and site.params["BLOCK"].values == [128, 256]
    out = set_values(src, {"scale_kernel": {"BLOCK": 2048, "num_warps": 8}})
    deco = next(d for d in rw.function(out, "scale_kernel").decorator_list if "autotune" in ast.unparse(d))
    configs = next(k.value for k in deco.keywords if k.arg == "configs")
    assert [ast.unparse(c) for c in configs.elts] == ["triton.Config({'BLOCK': 2048}, num_warps=8)"]


def test_refusals_say_why(rw):
    src = _src(rw, "launch_settings_helper")
    with pytest.raises(EditRefused, match="computed"):
        set_values(src, {"softmax_kernel": {"BLOCK": 256}})
    with pytest.raises(EditRefused, match="no launch"):
        set_values(src, {"missing_kernel": {"BLOCK": 256}})
