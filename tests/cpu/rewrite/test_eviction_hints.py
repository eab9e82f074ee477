"""eviction_hints: streamed loads evict_first, loads programs share evict_last; proposed from a memory-bound roofline."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.rewrite.eviction_hints import hinted_source
from tritondx.tools.verify.verification import verify_candidate

SHOWCASE = Path(__file__).resolve().parents[3] / "bench" / "families" / "eviction_hints.py"

NORM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def rope_norm_kernel(x_ptr, table_ptr, w_ptr, out_ptr, D: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    base = x_ptr + (row * 8 + head) * D
    x = tl.load(base + cols, mask=cols < D, other=0.0)
    x2 = tl.load(x_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0)
    t = tl.load(table_ptr + row * D + cols, mask=cols < D, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0)
    keep = tl.load(w_ptr + cols, mask=cols < D, other=0.0, eviction_policy="evict_first")
    tl.store(out_ptr + (row * 8 + head) * D + cols, (x + x2) * t * w + keep, mask=cols < D)
'''


def test_a_streamed_load_leaves_l2_first_and_the_candidate_passes(tmp_path):
    src, what = hinted_source(SHOWCASE.read_text())
    assert 'x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"), eviction_policy="evict_first")' in src
    # the second stage reads what every program of the first wrote: no program id, no hint
    assert 'p = tl.load(part_ptr + offs, mask=offs < m, other=-float("inf"))' in src
    assert what == ["block_max_kernel: 1 streamed load(s) evict_first, 0 shared evict_last"]
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    r = verify_candidate(str(SHOWCASE), str(cand), "cand", get_backend("interpreter"))
    assert r.passed, r.reason


def test_what_programs_share_stays_and_a_tensor_read_twice_gets_no_hint():
    src, _ = hinted_source(NORM)
    # x is loaded twice (through a local and directly): its lines may be read again, no evict_first
    assert "x = tl.load(base + cols, mask=cols < D, other=0.0)\n" in src
    assert "x2 = tl.load(x_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0)\n" in src
    # the table depends on the row only (every head reads it), the weight on no program id: both kept in L2
    assert 't = tl.load(table_ptr + row * D + cols, mask=cols < D, other=0.0, eviction_policy="evict_last")' in src
    assert 'w = tl.load(w_ptr + cols, mask=cols < D, other=0.0, eviction_policy="evict_last")' in src
    # a hint the author wrote is kept
    assert 'other=0.0, eviction_policy="evict_first")\n' in src and src.count("eviction_policy") == 3


def test_matmuls_and_kernels_without_program_ids_are_left_alone():
    dot = NORM.replace("(x + x2) * t * w + keep", "tl.sum(tl.dot(x[:, None], w[None, :]), axis=1)")
    assert hinted_source(dot) is None
    single = '''
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
'''
    assert hinted_source(single) is None


def test_the_profile_tier_proposes_it_for_a_memory_bound_kernel_below_80_percent():
    from tritondx.tools.evidence.profiler import roofline_findings
    from tritondx.tools.rewrite.base import RewriteContext
    from tritondx.tools.rewrite.expert import propose
    from tritondx.tools.task.spec import load_task

    def bench(ms):
        return {"ceilings": {"copy_bytes_per_s": 4.2e12, "matmul_flops_per_s": {"bf16": 8e14, "tf32": 4e14}},
                "shapes": [{"shape": [1 << 24], "dtype": "torch.float32", "bytes": 4 << 24, "flops": 0,
                            "variants": {"initial": {"median_ms": ms, "spread": 0.01}}}]}
    spec = load_task(SHOWCASE)
    for ms, expected in ((0.026, True), (0.0165, False)):   # 61% and 97% of the copy bandwidth
        ctx = RewriteContext(spec=spec, original=spec, kernel_class="reduction",
                             findings=roofline_findings(bench(ms), "initial"), can_time=True)
        assert ("eviction_hints" in [p.family for p in propose(ctx, limit=8)]) is expected, ms
