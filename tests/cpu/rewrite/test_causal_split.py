"""causal_split: the causal mask only on the diagonal key tiles; triage's causal_mask_every_tile fires on the
original, not on the candidate (its masked loop starts at the diagonal); a padding mask is left alone."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.causal_split import causal_source
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task, parse_task_source
from tritondx.tools.evidence.triage import triage


def _causal(spec):
    return [f for f in triage(spec)[1] if f.detector == "causal_mask_every_tile"]


def test_split_correct_and_finding_gone(rw, tmp_path):
    (f,) = _causal(load_task(rw.task_path("causal_split")))
    assert "# MASK" in f.source_text and f.suggests == ["causal_split"]
    (p,) = [p for p in propose(rw.context_from("causal_split", [])) if p.family == "causal_split"]
    assert p.motivated_by == [f.id]
    k = rw.function(p.source, "causal_attn_kernel")
    loops = [n for n in k.body if isinstance(n, ast.For)]
    assert len(loops) == 2
    assert not rw.calls(loops[0], "tl.where") and len(rw.calls(loops[1], "tl.where")) == 1
    assert ast.unparse(loops[1].iter).startswith("range(tl.maximum(tl.minimum(_tdx_diag_start,")
    rw.verify("causal_split", p.source, tmp_path)   # (80, 16): the last row block is partial
    assert _causal(parse_task_source(p.source, "cand.py")) == []
    assert causal_source(p.source) is None          # not split twice


def test_strict_mask_splits_one_row_earlier(rw):
    src = rw.task_path("causal_split").read_text().replace(
        "offs_m[:, None] >= (start_n + offs_n[None, :])", "offs_m[:, None] > (start_n + offs_n[None, :])")
    out, _ = causal_source(src)
    assert "(start_m * BLOCK_M - 0) // BLOCK_N" in out


def test_padding_mask_not_split(rw):
    # the same kernel with a key-padding mask over every key tile instead of the causal one
    src = rw.task_path("causal_split").read_text().replace(
        "range(0, (start_m + 1) * BLOCK_M, BLOCK_N)", "range(0, N, BLOCK_N)").replace(
        "tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, float(\"-inf\"))",
        "tl.where(cols[None, :] < N, qk, float(\"-inf\"))")
    assert "cols[None, :] < N, qk" in src
    assert _causal(parse_task_source(src, "bidir.py")) == []
    assert causal_source(src) is None
