"""rows_per_program's N-D path (``tools/rewrite/rows_nd.py``): a kernel whose block is already 2-D (a token's groups x
a group's elements) gets several rows of its program axis per program, as a leading axis of every value that
depends on the row; a destination index loaded per row becomes a vector of them. The candidate is checked by the
verifier under the interpreter (a partial last program included); kernels that break a rule are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.rewrite import rows_per_program as rpp
from tritondx.tools.rewrite.cst_util import jit_functions, parse
from tritondx.tools.rewrite.rows_nd import plan
from tritondx.tools.verify.verification import verify_candidate

TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def group_scale_kernel(x_ptr, idx_ptr, q_ptr, s_ptr, G, GD: tl.constexpr, BG: tl.constexpr):
    t = tl.program_id(0)
    offs_g = tl.arange(0, BG)
    offs_d = tl.arange(0, GD)
    dst = tl.load(idx_ptr + t)
    m = offs_g[:, None] < G
    x = tl.load(x_ptr + t * G * GD + offs_g[:, None] * GD + offs_d[None, :], mask=m, other=0.0)
    s = tl.max(tl.abs(x), axis=1) / 127.0
    tl.store(q_ptr + dst * G * GD + offs_g[:, None] * GD + offs_d[None, :], x / s[:, None], mask=m)
    tl.store(s_ptr + dst * G + offs_g, s, mask=offs_g < G)


def launch(x, idx):
    T, G, GD = x.shape
    q = torch.empty_like(x)
    s = torch.empty((T, G), device=x.device, dtype=x.dtype)
    group_scale_kernel[(T,)](x, idx, q, s, G, GD=GD, BG=triton.next_power_of_2(G))
    return q, s


def reference(x, idx):
    s = x.abs().amax(dim=2) / 127.0
    q, out_s = torch.empty_like(x), torch.empty_like(s)
    q[idx.long()] = x / s[:, :, None]
    out_s[idx.long()] = s
    return q, out_s


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    idx = torch.randperm(shape[0], generator=g).to(device=device, dtype=torch.int32)
    return x, idx


CHECK_SHAPES = [(5, 3, 8), (37, 12, 8)]
BENCH_SHAPES = [(4096, 16, 8)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''


def _kernel(src: str):
    return jit_functions(parse(src))["group_scale_kernel"]


def test_the_rows_go_in_front_of_the_block():
    new, what = rpp.rows_source(TASK, "group_scale_kernel", 2048, 64)
    assert "up to 64 rows of program axis 0" in what
    assert "_tdx_rows = tl.program_id(0) * TDX_BLOCK_R + tl.arange(0, TDX_BLOCK_R)" in new
    assert "    dst = tl.load(idx_ptr + t, mask=_tdx_rows_ok)\n" in new                  # one index per row
    assert "(x_ptr + t * G * GD)[:, None, None] + offs_g[:, None] * GD + offs_d[None, :]" in new
    assert "mask=m & _tdx_rows_ok[:, None, None]" in new
    assert "s = tl.max(tl.abs(x), axis=2) / 127.0" in new and "x / s[:, :, None]" in new
    assert "(s_ptr + dst * G)[:, None] + offs_g" in new and "mask=(offs_g < G) & _tdx_rows_ok[:, None]" in new
    assert "_tdx_block_r = max(1, min(64, 2048 // (" in new and "TDX_ROWS=T" in new
    assert "group_scale_kernel[(triton.cdiv(T, _tdx_block_r)" in new and "TDX_BLOCK_R=_tdx_block_r" in new
    compile(new, "cand.py", "exec")


def test_the_candidate_passes_the_verifier(tmp_path):
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(TASK)
    cand.write_text(rpp.rows_source(TASK, "group_scale_kernel", 2048, 64)[0])
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"))
    assert r.passed, r.reason


@pytest.mark.parametrize("old,new,why", [
    ("    s = tl.max(tl.abs(x), axis=1) / 127.0\n",
     "    s = tl.max(tl.abs(x), axis=1) / 127.0\n    if dst > 0:\n        s = s * 1.0\n", "a branch on a row value"),
    ("    offs_d = tl.arange(0, GD)\n",
     "    offs_d = tl.arange(0, GD)\n    acc = G * 0.0\n    for i in range(0, G):\n        acc += tl.load(x_ptr + t * G * GD + i)\n",
     "a scalar computed from parameters that takes a row value in a loop (only a number is made one per row)"),
    ("    offs_d = tl.arange(0, GD)\n", "    offs_d = tl.arange(0, GD)\n    for i in range(0, t):\n        pass\n",
     "a loop whose bound is the row"),
    ("    tl.store(s_ptr + dst * G + offs_g, s, mask=offs_g < G)\n",
     "    tl.store(s_ptr + offs_g, s, mask=offs_g < G)\n", "a store the row does not address"),
    ("tl.max(tl.abs(x), axis=1)", "tl.max(tl.abs(x))", "a reduction of the whole of a 2-D row value"),
    ("x / s[:, None]", "x / s[0]", "an index in a subscript of a row value"),
])
def test_kernels_that_break_a_rule_are_left_alone(old, new, why):
    assert old in TASK, why
    src = TASK.replace(old, new)
    assert plan(_kernel(src), 0) is None, why
    assert rpp.rows_source(src, "group_scale_kernel", 2048, 64) is None, why


CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
#: third-party kernels of this shape: lightllm's destination-index KV copy with int8 quantization (131072 programs
#: of 128 elements on its benchmark; a 2-D block, a destination index per token) and ColossalAI's decoding rotary
#: embedding with its KV-cache write (one program per head and token; aranges from HEAD_DIM // 2 to HEAD_DIM) and
#: lightllm's flash-decoding reduction (an online softmax over sequence blocks whose running max and sum start as
#: Python scalars: each row gets its own, ``tl.full([TDX_BLOCK_R], ...)``)
THIRD_PARTY = [("tbg_lightllm_quantize_kv_copy", "_fwd_kernel_destindex_copy_quantize_kv", 0),
               ("tbg_colossalai_decode_rope_kvcache", "decoding_fused_rotary_embedding_kernel", 1),
               ("tbg_lightllm_flash_decode_stage2", "_fwd_kernel_flash_decode_stage2", 1)]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")
@pytest.mark.parametrize("name,kernel,axis", THIRD_PARTY, ids=[t[0] for t in THIRD_PARTY])
def test_third_party_kernels_pass_the_verifier(tmp_path, name, kernel, axis):
    src = (CORPUS / f"{name}.py").read_text()
    new, what = rpp.rows_source(src, kernel, 2048, 64)
    assert f"program axis {axis}" in what
    if "flash_decode" in name:
        assert '    max_logic = tl.full([TDX_BLOCK_R], -float("inf"), tl.float32)\n' in new
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(src)
    cand.write_text(new)
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"), allowed_ops=["clone"])
    assert r.passed, r.reason


def test_rows_keep_two_programs_per_sm_where_the_launch_is_known():
    """A launch record at the benchmark size (``tiny_programs_launch``'s programs): rows per program are capped so
    that 2 programs per SM remain, and one size is proposed where the cap binds; without a count, both sizes."""
    from tritondx.tools.records.evidence import Finding
    from tritondx.tools.rewrite.base import RewriteContext
    from tritondx.tools.rewrite.rows_per_program import row_cap, rows_per_program
    from tritondx.tools.task.spec import parse_task_source
    assert (row_cap(2048), row_cap(131072), row_cap(100)) == (4, 256, 1)
    spec = parse_task_source(TASK, "task.py")

    def props(metric):
        f = Finding(id="f1", detector="tiny_programs_launch", tier="triage", stage="launch",
                    kernel="group_scale_kernel", severity="high", message="tiny", metric=metric)
        return rows_per_program(RewriteContext(spec=spec, original=spec, kernel_class="reduction", findings=[f]))

    capped = props({"programs": 2048})
    assert [p.params["max_rows"] for p in capped] == [4] and "min(4, 2048 // " in capped[0].source
    assert [p.params["max_rows"] for p in props({})] == [64, 128]
