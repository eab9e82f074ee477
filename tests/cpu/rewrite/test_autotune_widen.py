"""autotune_widen: an autotune list of one distinct config widened with its coordinate neighbors; triage's
tiny_autotune_space fires on it and not on the candidate; a list of four configs is left alone."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.autotune_widen import MAX_CONFIGS, widen_source
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task, parse_task_source
from tritondx.tools.evidence.triage import triage


def _tiny(spec):
    return [f for f in triage(spec)[1] if f.detector == "tiny_autotune_space"]


def _configs(src):
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "scale_bias_kernel")
    dec = next(d for d in fn.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func) == "triton.autotune")
    return [ast.unparse(c) for c in next(k.value for k in dec.keywords if k.arg == "configs").elts]


def test_widened_around_the_first_config(rw, tmp_path):
    (f,) = _tiny(load_task(rw.task_path("autotune_widen")))
    assert f.metric["configs"] == 1 and f.suggests == ["autotune_widen"]
    (p,) = [p for p in propose(rw.context_from("autotune_widen", [])) if p.family == "autotune_widen"]
    assert _configs(p.source) == [
        "triton.Config({'BLOCK': 256}, num_warps=4)",
        "triton.Config({'BLOCK': 128}, num_warps=4)", "triton.Config({'BLOCK': 512}, num_warps=4)",
        "triton.Config({'BLOCK': 256}, num_warps=2)", "triton.Config({'BLOCK': 256}, num_warps=8)",
        "triton.Config({'BLOCK': 256}, num_warps=4, num_stages=2)",
        "triton.Config({'BLOCK': 256}, num_warps=4, num_stages=4)"]
    # the interpreter runs one configuration per call in turn: 7 check shapes x several calls cover all 7
    rw.verify("autotune_widen", p.source, tmp_path)
    assert _tiny(parse_task_source(p.source, "cand.py")) == []


def test_wide_list_left_alone(rw):
    src = rw.task_path("autotune_widen").read_text().replace(
        'triton.Config({"BLOCK": 256}, num_warps=4)],',
        'triton.Config({"BLOCK": 512}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8),'
        ' triton.Config({"BLOCK": 128}, num_warps=2)],')
    assert _tiny(parse_task_source(src, "t.py")) == []
    assert widen_source(src) is None


def test_bounded(rw):
    from tritondx.tools.rewrite.autotune_widen import neighbors
    blocks = {f"BLOCK_{c}": 64 for c in "MNKXYZ"}
    assert len(neighbors(blocks, {"num_warps": 4, "num_stages": 3}, 16)) + 1 > MAX_CONFIGS
    src = rw.task_path("autotune_widen").read_text().replace(
        'triton.Config({"BLOCK": 256}, num_warps=4),\n', "").replace(
        'triton.Config({"BLOCK": 256}, num_warps=4)]', f"triton.Config({blocks!r}, num_warps=4, num_stages=3)]")
    out, done = widen_source(src)
    assert done == {"scale_bias_kernel": MAX_CONFIGS} and len(_configs(out)) == MAX_CONFIGS
