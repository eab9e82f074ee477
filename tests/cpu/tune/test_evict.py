"""The tuner's evict knob: which loads get which L2 eviction hint (``tools/tune/evict.py``), written by ``emit``."""

from __future__ import annotations

import textwrap

from tritondx.tools.tune import space as spacemod

HEAD = '''
import torch
import triton
import triton.language as tl


'''

NORM = HEAD + '''@triton.jit
def rope_norm_kernel(x_ptr, table_ptr, w_ptr, out_ptr, D: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    base = x_ptr + (row * 8 + head) * D
    x = tl.load(base + cols, mask=cols < D, other=0.0)
    x2 = tl.load(x_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0)
    y = tl.load(out_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0)
    t = tl.load(table_ptr + row * D + cols, mask=cols < D, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0)
    keep = tl.load(w_ptr + cols, mask=cols < D, other=0.0, eviction_policy="evict_first")
    tl.store(out_ptr + (row * 8 + head) * D + cols, (x + x2 + y) * t * w + keep, mask=cols < D)


def launch(x, table, w):
    out = torch.zeros_like(x)
    rope_norm_kernel[(x.shape[0], 8)](x, table, w, out, D=x.shape[-1], BLOCK=triton.next_power_of_2(x.shape[-1]))
    return out
'''


def _hinted(src: str) -> str:
    keys = [k.key for k in spacemod.build(src).knobs if k.kind == "evict"]
    return spacemod.emit(src, {k: 1 for k in keys})


def test_streamed_loads_leave_l2_first_shared_ones_stay_and_a_tensor_read_twice_gets_no_hint():
    src = _hinted(NORM)
    # each program its own (row, head) slice, loaded once: evict_first
    assert ('y = tl.load(out_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0, '
            'eviction_policy="evict_first")') in src
    # x is loaded twice (through a local and directly): its lines may be read again, no hint
    assert "x = tl.load(base + cols, mask=cols < D, other=0.0)\n" in src
    assert "x2 = tl.load(x_ptr + (row * 8 + head) * D + cols, mask=cols < D, other=0.0)\n" in src
    # the table depends on the row only (every head reads it), the weight on no program id: both kept in L2
    assert 't = tl.load(table_ptr + row * D + cols, mask=cols < D, other=0.0, eviction_policy="evict_last")' in src
    assert 'w = tl.load(w_ptr + cols, mask=cols < D, other=0.0, eviction_policy="evict_last")' in src
    # a hint the author wrote is kept
    assert src.count('eviction_policy="evict_first")') == 2 and src.count("eviction_policy") == 4


def test_matmuls_and_kernels_without_program_ids_get_no_evict_knob():
    dot = NORM.replace("(x + x2 + y) * t * w + keep", "tl.sum(tl.dot(x[:, None], w[None, :]), axis=1)")
    assert not [k for k in spacemod.build(dot).knobs if k.kind == "evict"]
    single = HEAD + textwrap.dedent('''\
        @triton.jit
        def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))


        def launch(x):
            out = torch.empty_like(x)
            k[(1,)](x, out, BLOCK=triton.next_power_of_2(x.numel()))
            return out
        ''')
    assert not [k for k in spacemod.build(single).knobs if k.kind == "evict"]


PASSES = HEAD + '''@triton.jit
def norm_kernel(x_ptr, w_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0)
    mean = tl.sum(acc, axis=0) / N
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0)
        tl.store(out_ptr + row * N + cols, (x - mean) * w, mask=cols < N)


def launch(x, w):
    out = torch.empty_like(x)
    norm_kernel[(x.shape[0],)](x, w, out, x.shape[1], BLOCK=1024)
    return out
'''


def test_a_row_walked_in_two_loops_keeps_its_lines_for_the_second_pass_which_streams():
    src = _hinted(PASSES)
    assert 'acc += tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")' in src
    assert 'x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_first")' in src
    assert 'w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")' in src


EVEN = HEAD + '''@triton.jit
def even_kernel(x_ptr, w_ptr, out_ptr, K, BLOCK: tl.constexpr, EVEN_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols)
    if EVEN_K:
        x = tl.load(x_ptr + row * K + cols)
    else:
        x = tl.load(x_ptr + row * K + cols, mask=cols < K, other=0.0)
    tl.store(out_ptr + row * K + cols, x * w, mask=cols < K)


def launch(x, w):
    out = torch.empty_like(x)
    K = x.shape[1]
    even_kernel[(x.shape[0],)](x, w, out, K, BLOCK=64, EVEN_K=K % 64 == 0)
    return out
'''


def test_an_arm_no_recorded_launch_takes_gets_no_hint():
    """The verifier rejects a change in an arm no checked input reaches (vLLM's bgmv expand: its tuned winner hinted
    both arms of ``if EVEN_K`` and was rejected); the record's constexprs say which arm the launches take."""
    keys = [k.key for k in spacemod.build(EVEN).knobs if k.kind == "evict"]
    assert keys == ["even_kernel.evict"]
    rec = [{"kernel": "even_kernel", "constexprs": {"BLOCK": 64, "EVEN_K": True}}]
    src = spacemod.emit(EVEN, {k: 1 for k in keys}, launches=rec)
    assert 'x = tl.load(x_ptr + row * K + cols, eviction_policy="evict_first")' in src
    assert "x = tl.load(x_ptr + row * K + cols, mask=cols < K, other=0.0)\n" in src
    assert src.count("eviction_policy") == 2   # and the weight's evict_last
    # launches on both sides, or none of this kernel's: every arm counts, x is read twice and gets no hint
    both = rec + [{"kernel": "even_kernel", "constexprs": {"BLOCK": 64, "EVEN_K": False}}]
    other = [{"kernel": "another_kernel", "constexprs": {"EVEN_K": True}}]
    for launches in (both, other, None):
        src = spacemod.emit(EVEN, {k: 1 for k in keys}, launches=launches)
        assert src.count("eviction_policy") == 1 and 'w = tl.load(w_ptr + cols, eviction_policy="evict_last")' in src
