"""rows_per_program: a grid of tiny programs (one token or (token, head) each, 64-128 bytes) -> several rows per
program as a 2-D block, on kernels written for the test: a gather through a loaded index and a per-head layer norm
(reductions become per-row columns). Verified under the interpreter; the IR tier's tiny_programs finding (cuda:90,
compiled on CPU at the task's benchmark shape) is gone from the candidate. Kernels whose rows share work are
left alone."""

from __future__ import annotations

import pytest
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.rows_per_program import rows_source
from tritondx.tools.task.spec import load_task


def _tiny(findings):
    return [f for f in findings if f.detector == "tiny_programs"]


@pytest.mark.parametrize("task,kernel", [("tiny_rows_scatter", "scatter_rows_kernel"),
                                         ("rows_per_program", "head_norm_kernel")])
def test_rows_per_program_verified_and_the_finding_gone(rw, tmp_path, task, kernel):
    found = _tiny(rw.ir_findings(rw.task_path(task), tmp_path / "ir0"))
    assert found and found[0].kernel == kernel
    ctx = rw.context_from(task, found)
    props = [p for p in propose(ctx, limit=8) if p.family == "rows_per_program"]
    assert [p.params["max_rows"] for p in props] == [64, 128]
    assert all(found[0].id in p.motivated_by for p in props)
    for i, p in enumerate(props):
        rw.verify(task, p.source, tmp_path, f"c{i}")
    cand = tmp_path / "cand.py"
    cand.write_text(props[0].source)
    assert _tiny(rw.ir_findings(cand, tmp_path / "ir1")) == []


SHARED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = 0.0
    for s in range(0, N, BLOCK):
        acc += tl.sum(tl.load(x_ptr + row * N + s + cols, mask=s + cols < N, other=0.0), axis=0)
    tl.store(out_ptr + row, acc)


def launch(x):
    out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
    k[(x.shape[0],)](x, out, x.shape[1], BLOCK=16)
    return out
'''


SHARED_TASK = SHARED + '''

def reference(x):
    return x.sum(dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(5, 40), (70, 33)]
BENCH_SHAPES = [(1 << 16, 64)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
'''


def test_a_scalar_accumulator_takes_the_nd_path(tmp_path):
    """A Python scalar accumulated in a loop: the 1-D path refuses it; the N-D path (``rows_nd``) starts it as one
    value per row, and the verifier takes the candidate (rows of a partial last program included)."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    src, _ = rows_source(SHARED_TASK, "k", 2048, 64)
    assert "    acc = tl.full([TDX_BLOCK_R], 0.0, tl.float32)\n" in src
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(SHARED_TASK)
    cand.write_text(src)
    r = verify_candidate(str(task), str(cand), "c", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"


def test_kernels_it_cannot_take_are_left_alone():
    ok = SHARED.replace("acc = 0.0", "acc = tl.zeros([BLOCK], tl.float32)").replace(
        "acc += tl.sum(tl.load(x_ptr + row * N + s + cols, mask=s + cols < N, other=0.0), axis=0)",
        "acc += tl.load(x_ptr + row * N + s + cols, mask=s + cols < N, other=0.0)").replace(
        "tl.store(out_ptr + row, acc)", "tl.store(out_ptr + row, tl.sum(acc, axis=0))")
    assert rows_source(ok, "k", 2048, 64) is not None    # the same with a block accumulator
    assert rows_source(ok.replace("tl.store(out_ptr + row,", "tl.store(out_ptr,"), "k", 2048, 64) is None  # shared store
    assert rows_source(ok.replace("range(0, N, BLOCK)", "range(0, N + row, BLOCK)"), "k", 2048, 64) is None
    assert rows_source(ok.replace("tl.sum(acc, axis=0)", "tl.cumsum(acc, axis=0)"), "k", 2048, 64) is None


ADVANCED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def unit_rows_kernel(X, Y, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
    tl.store(Y + cols, x * rstd, mask=cols < N)


def launch(x):
    y = torch.empty_like(x)
    unit_rows_kernel[(x.shape[0],)](x, y, x.stride(0), x.shape[1], 1e-6, triton.next_power_of_2(x.shape[1]))
    return y


def reference(x):
    return x / torch.sqrt((x.float() ** 2).sum(-1, keepdim=True) + 1e-6)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(130, 24)]
BENCH_SHAPES = [(1 << 20, 32)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''


def test_pointer_advanced_at_the_top_level(tmp_path):
    """``X += row * stride`` (the usual idiom) becomes a column of pointers; the constexpr passed positionally."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    task = tmp_path / "unit_rows.py"
    task.write_text(ADVANCED)
    src, _ = rows_source(ADVANCED, "unit_rows_kernel", 2048, 64)
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    r = verify_candidate(str(task), str(cand), "c", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"
    looped = ADVANCED.replace("    x = tl.load(X + cols", "    for _ in range(1):\n        X += 0\n    x = tl.load(X + cols")
    # advanced inside a loop as well: the 1-D path refuses it; the N-D path (``rows_nd``, rank-aware) sees that X
    # stays a vector of row pointers through the loop, and the verifier takes its candidate
    src, _ = rows_source(looped, "unit_rows_kernel", 2048, 64)
    assert "    for _ in range(1):\n        X += 0\n    x = tl.load((X)[:, None] + cols" in src
    task.write_text(looped)
    cand.write_text(src)
    r = verify_candidate(str(task), str(cand), "c", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"


def test_multi_pass_rows_read_once(rw, tmp_path):
    """A multi-pass row kernel (two passes over a short row, one row a program) takes its rows together on the
    one-block sibling (``row_resident`` first): each program reads its rows once, not once per pass; rows longer
    than the sibling's block keep the original passes, one row a program. ``tl.range`` with keywords is a pass
    too."""
    import ast
    from tritondx.tools.rewrite.rows_per_program import one_pass_rows
    passes = rw.task_path("passes_norm").read_text()
    src, what = one_pass_rows(passes, "passes_norm_kernel", 2048, 64)
    assert "rows up to 16384 elements read once" in what
    row = rw.function(src, "passes_norm_kernel_row")
    assert not [n for n in ast.walk(row) if isinstance(n, ast.For)]
    assert len(rw.calls(row, "tl.load")) == 1 and "TDX_BLOCK_R" in {a.arg for a in row.args.args}
    launch = rw.function(src, "launch")
    (branch,) = [n for n in ast.walk(launch) if isinstance(n, ast.If)]
    assert "passes_norm_kernel_row[" in ast.unparse(branch.body) and "TDX_BLOCK_R" in ast.unparse(branch.body)
    assert "passes_norm_kernel[x.shape[0],](x, y, x.shape[1], 16)" in ast.unparse(branch.orelse)
    rw.verify("passes_norm", src, tmp_path)
    # a single-pass kernel has no sibling to take rows on: the plain rows rewrite is the proposal
    assert one_pass_rows(SHARED, "k", 2048, 64) is None
