"""deinterleave: a pair read (or written) as ``p`` and ``p + 1`` with its address stepping by 2 becomes one flat tile
taken apart with ``tl.split`` (``tools/rewrite/deinterleave.py``; ``interleaved_pair`` in the source triage)."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.rewrite.deinterleave import kernel_source
from tritondx.tools.rewrite.expert import propose
from tdx_interp import run_interpreted

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
    r = run_interpreted(code, timeout=300)   # the warm interpreter host (tests/cpu/tdx_interp.py)
    assert r.returncode == 0, r.stderr[-3000:]


def test_a_second_mask_that_is_not_the_first_moved_on_leaves_the_pair_alone():
    src = SHOWCASE.read_text()
    assert kernel_source(src, "rotate_kernel") is not None
    # the imaginary part masked with the real part's bound: a flat mask would invent the odd elements' bound
    same = src.replace("im_mask = (offs_m[:, None] < M) & (offs_k[None, :] + 1 < K)",
                       "im_mask = (offs_m[:, None] < M) & (offs_k[None, :] + 2 < K)")
    assert kernel_source(same, "rotate_kernel") is None
    # the pair index scaled by a product or inside a larger product: its stride is not the one factor beside it
    for addr in ("x_ptr + offs_m[:, None] * stride_xm + 1 * offs_k[None, :] * stride_xk",
                 "x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk * 1",
                 "x_ptr + offs_m[:, None] * stride_xm - offs_k[None, :] * stride_xk"):
        other = src.replace("x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk", addr)
        assert other != src and "load x_ptrs" not in kernel_source(other, "rotate_kernel")[1]
    # a partner two elements on is no pair
    assert kernel_source(src.replace("x_ptrs + 1", "x_ptrs + 2").replace("o_ptrs + 1", "o_ptrs + 2"),
                         "rotate_kernel") is None
    # the pair's second value used between the two loads: left alone (the stores still pair)
    used = src.replace("    im = tl.load(x_ptrs + 1", "    im = re\n    re = re + im\n    im = tl.load(x_ptrs + 1")
    new = kernel_source(used, "rotate_kernel")
    assert new is not None and "load x_ptrs" not in new[1] and "store o_ptrs" in new[1]
    unpacked = src.replace("    im = tl.load(x_ptrs + 1", "    re, k = re * 2, 1\n    im = tl.load(x_ptrs + 1")
    assert "load x_ptrs" not in kernel_source(unpacked, "rotate_kernel")[1]


CMUL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def cmul_kernel(a_ptr, b_ptr, out_ptr, n, L, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    br = tl.load(b_ptr + offs * 2, mask=mask, other=0.0)
    bi = tl.load(b_ptr + offs * 2 + 1, mask=mask, other=0.0)
    for t in range(L):
        o = (t * n + offs) * 2
        ar = tl.load(a_ptr + o, mask=mask, other=0.0)
        ai = tl.load(a_ptr + o + 1, mask=mask, other=0.0)
        tl.store(out_ptr + o, ar * br - ai * bi, mask=mask)
        tl.store(out_ptr + o + 1, ar * bi + ai * br, mask=mask)


def launch(a, b):
    out = torch.empty_like(a)
    cmul_kernel[(triton.cdiv(a.shape[1], 256),)](a, b, out, a.shape[1], a.shape[0], BLOCK=256)
    return out
'''


def test_a_pair_under_one_mask_becomes_a_tile_of_pairs_in_loops_too(tmp_path):
    """``p + offs * 2`` and ``+ 1`` under one mask (FlagGems' complex ops): a ``[..., 2]`` tile, the mask broadcast
    along it, in the kernel's body and in a loop's; a ``.to(...)`` after both loads stays after the one."""
    new, what = kernel_source(CMUL, "cmul_kernel")
    assert what.count("[..., 2] tile") == 3 and "ai = tl.load" not in new and "tl.store(out_ptr + o + 1" not in new
    assert "_tdx_pair1_ptr = tl.expand_dims(a_ptr + o, -1) + tl.arange(0, 2)" in new
    assert "        ar, ai = tl.split(_tdx_pair1_v)" in new    # still inside the loop
    assert "tl.store(_tdx_pair2_ptr, tl.join(ar * br - ai * bi, ar * bi + ai * br), mask=tl.expand_dims(mask, -1))" \
        in new
    (tmp_path / "a.py").write_text(CMUL)
    (tmp_path / "b.py").write_text(new)
    code = ("import importlib.util as u, torch\n"
            "def load(p, n):\n    s = u.spec_from_file_location(n, p); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); return m\n"
            f"a, b = load({str(tmp_path / 'a.py')!r}, 'a'), load({str(tmp_path / 'b.py')!r}, 'b')\n"
            "for L, n in ((3, 300), (2, 5)):\n"
            "    x, y = torch.randn(L, n, 2), torch.randn(n, 2)\n"
            "    assert torch.equal(a.launch(x, y), b.launch(x, y))\n")
    r = run_interpreted(code, timeout=300)   # the warm interpreter host (tests/cpu/tdx_interp.py)
    assert r.returncode == 0, r.stderr[-3000:]
    # a shifted tile (x + offs and x + offs + 1: lanes one element apart) is no pair
    shifted = CMUL.replace("b_ptr + offs * 2", "b_ptr + offs")
    assert "load b_ptr" not in kernel_source(shifted, "cmul_kernel")[1]


def test_a_two_by_two_pool_reads_its_pairs_as_pairs(rw, tmp_path):
    src = rw.task_path("l2_avgpool2d").read_text()
    new, what = kernel_source(src, "avgpool_kernel")
    assert what.count("[..., 2] tile") == 2
    assert "_tdx_pair0_v = tl.load(_tdx_pair0_ptr, mask=tl.expand_dims(mask, -1)).to(tl.float32)" in new
    assert "a, b = tl.split(_tdx_pair0_v)" in new and "c, d = tl.split(_tdx_pair1_v)" in new
    rw.verify("l2_avgpool2d", new, tmp_path)
