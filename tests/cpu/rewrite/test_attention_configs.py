"""The flash-attention template (unmasked full key blocks, scale folded into exp2) and its launch_config space."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.base import CATALOG
from tritondx.tools.rewrite.launch_config import ATTN_SPACE
from tritondx.tools.task.spec import parse_task_source


def _flash(rw, variant: int = 0):
    ctx, props = rw.proposals("l3_attention", "fuse_passes")
    att = [p for p in props if p.params.get("template") == "flash_attention"]
    return ctx, att[variant]


def test_flash_main_loop_is_unmasked(rw):
    _, p = _flash(rw)
    k = rw.function(p.source, "_tdx_flash_attn_fwd_kernel")
    loop = next(n for n in ast.walk(k) if isinstance(n, ast.For))
    # full key blocks: no mask on the K/V loads of the D == BLOCK_D branch, no select on the scores
    assert not rw.calls(loop, "tl.where")
    assert any(not c.keywords for c in rw.calls(loop, "tl.load"))
    # P @ V accumulates into acc (wgmma with the accumulator in registers), not dot + add
    assert any(len(c.args) == 3 for c in rw.calls(loop, "tl.dot"))
    launch = ast.unparse(rw.function(p.source, "launch"))
    assert "EVEN_N=S % BLOCK_N == 0" in launch


def test_launch_config_searches_attention_tiles(rw, tmp_path):
    ctx, p = _flash(rw)
    spec = parse_task_source(p.source, str(tmp_path / "flash.py"))
    ctx.spec = spec
    props = CATALOG["launch_config"].fn(ctx)
    got = [(v["_tdx_flash_attn_fwd_kernel"]["BLOCK_M"], v["_tdx_flash_attn_fwd_kernel"]["BLOCK_N"],
            v["_tdx_flash_attn_fwd_kernel"]["num_warps"], v["_tdx_flash_attn_fwd_kernel"]["num_stages"])
           for v in (q.params for q in props)]
    assert got and set(got) <= set(ATTN_SPACE) and (128, 64, 8, 3) not in got   # the current config is not re-proposed
    src = props[0].source
    assert "BLOCK_M, BLOCK_N = 128, 64" in src and "num_warps=4" in src
    # the 64x64 tile: the masked tail (S = 40, 77) and the unmasked loop (S = 128) both run
    small = next(q for q in props if q.params["_tdx_flash_attn_fwd_kernel"]["BLOCK_M"] == 64)
    rw.verify("l3_attention", small.source, tmp_path)
