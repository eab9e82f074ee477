"""deinterleave: a pair read (or written) as ``p`` and ``p + 1`` with its address stepping by 2 becomes one flat tile
taken apart with ``tl.split`` (``tools/rewrite/deinterleave.py``; ``interleaved_pair`` in the source triage)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tritondx.tools.rewrite.deinterleave import kernel_source
from tritondx.tools.rewrite.expert import propose

SHOWCASE = Path(__file__).resolve().parents[3] / "bench" / "families" / "deinterleave.py"


def test_the_pair_becomes_one_flat_tile_and_the_candidate_passes(rw, tmp_path):
    ctx = rw.make_context("deinterleave")
    found = [f for f in ctx.findings if f.detector == "interleaved_pair"]
    assert [f.suggests for f in found] == [["deinterleave"]] * 2   # the loads and the stores
    (p,) = [p for p in propose(ctx) if p.family == "deinterleave"]
    src = p.source
    assert "im = tl.load(x_ptrs + 1" not in src and "tl.store(o_ptrs + 1" not in src
    assert "re, im = tl.split(tl.reshape(_tdx_pair0_v, [_tdx_pair0_v.shape[0], BLOCK_K // 2, 2]))" in src
    # the flat index along the pair axis: exact for any stride, the second term folds where the JIT specializes 1
    assert ("x_ptr + offs_m[:, None] * stride_xm + (stride_xk * _tdx_pair0_n[None, :] + (1 - stride_xk) * "
            "(_tdx_pair0_j % 2)[None, :])") in src
    # the flat mask is the first access's with the pair index replaced by the flat one
    assert "mask=(offs_m[:, None] < M) & (_tdx_pair0_n[None, :] < K), other=0.0)" in src
    assert "tl.reshape(tl.join(_tdx_pair1_a, _tdx_pair1_b), [_tdx_pair1_a.shape[0], 2 * (BLOCK_K // 2)])" in src
    rw.verify("deinterleave", src, tmp_path)
    # on a view whose pair axis is strided (stride 2: the general address) it computes what the original computes
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    code = ("import importlib.util as u, torch\n"
            "def load(p, n):\n    s = u.spec_from_file_location(n, p); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); return m\n"
            f"a, b = load({str(SHOWCASE)!r}, 'a'), load({str(cand)!r}, 'b')\n"
            "x, th = a.make_inputs((7, 300), torch.float16, 3, 'cpu')\n"
            "xs = torch.randn(7, 600).half()[:, ::2]\n"
            "assert torch.equal(a.launch(xs, th), b.launch(xs, th))\n"
            "assert torch.equal(a.launch(x, th), b.launch(x, th))\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)


def test_a_second_mask_that_is_not_the_first_moved_on_leaves_the_pair_alone():
    src = SHOWCASE.read_text()
    assert kernel_source(src, "rotate_kernel") is not None
    # the imaginary part masked with the real part's bound: a flat mask would invent the odd elements' bound
    same = src.replace("im_mask = (offs_m[:, None] < M) & (offs_k[None, :] + 1 < K)",
                       "im_mask = (offs_m[:, None] < M) & (offs_k[None, :] + 2 < K)")
    assert kernel_source(same, "rotate_kernel") is None
    # a partner two elements on is no pair
    assert kernel_source(src.replace("x_ptrs + 1", "x_ptrs + 2").replace("o_ptrs + 1", "o_ptrs + 2"),
                         "rotate_kernel") is None
    # the pair's second value used between the two loads: left alone (the stores still pair)
    used = src.replace("    im = tl.load(x_ptrs + 1", "    im = re\n    re = re + im\n    im = tl.load(x_ptrs + 1")
    new = kernel_source(used, "rotate_kernel")
    assert new is not None and "load x_ptrs" not in new[1] and "store o_ptrs" in new[1]
