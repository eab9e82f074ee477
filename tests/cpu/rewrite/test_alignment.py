"""alignment_hints: tl.multiple_of / tl.max_contiguous where the offsets start on a block multiple."""

from __future__ import annotations

import ast
import re

import pytest


def _hinted(src, kernel):
    return [ast.unparse(n.targets[0]) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "tl.max_contiguous"]


def test_flat_offsets(rw, tmp_path):
    _, props = rw.proposals("l1_add", "alignment_hints", detector="non_vectorized_global_access")
    (p,) = props
    (assign,) = [n for n in ast.walk(rw.function(p.source, "add_kernel")) if isinstance(n, ast.Assign)
                 and ast.unparse(n.targets[0]) == "offs"]
    assert ast.unparse(assign.value) == \
        "tl.max_contiguous(tl.multiple_of(pid * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)"
    rw.verify("l1_add", p.source, tmp_path)


def test_loop_and_tile_offsets(rw):
    _, props = rw.proposals("l3_matmul", "alignment_hints", detector="coalesce_layout")
    assert sorted(_hinted(props[0].source, "matmul_kernel")) == ["rk", "rm", "rn"]


def test_unaligned_start_not_hinted(rw):
    assert rw.proposals("shifted_diff", "alignment_hints")[1] == []


def test_unspecialized_arguments_get_a_launcher_checked_flag(rw, tmp_path):
    # offset (by name) and n (index 3) reach an address / a mask; scale (a float in the stored value) does not
    _, props = rw.proposals("unspecialized_bucket", "alignment_hints", detector="missing_alignment_info")
    (p,) = props
    assert p.params["aligned_args"] == {"bucket_kernel": ["offset", "n"]}
    k = rw.function(p.source, "bucket_kernel")
    assert ast.unparse(k.args.args[-1]) == "ALIGNED16: tl.constexpr"
    guard = k.body[0]
    assert isinstance(guard, ast.If) and ast.unparse(guard.test) == "ALIGNED16"
    assert [ast.unparse(s) for s in guard.body] == ["offset = offset // 16 * 16", "n = n // 16 * 16"]
    call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["ALIGNED16"] == \
        "offset % 16 == 0 and g.numel() % 16 == 0"
    rw.verify("unspecialized_bucket", p.source, tmp_path)   # (3, 7) runs the unaligned binary for b


def test_specialized_arguments_get_no_flag(rw):
    # l1_add's n is specialized by the JIT: only the (redundant, always true) block-offset hint
    _, props = rw.proposals("l1_add", "alignment_hints")
    assert "aligned_args" not in props[0].params and "ALIGNED16" not in props[0].source


def test_flag_needs_a_pure_launch_argument(rw):
    from tritondx.tools.rewrite.alignment import unspecialized_alignment
    src = rw.task_path("unspecialized_bucket").read_text()
    assert unspecialized_alignment(src, "bucket_kernel") is not None
    # an argument computed by a call with side effects would be evaluated twice: no rewrite
    impure = src.replace("g.numel(), 0.5, BLOCK=512", "next_size(g), 0.5, BLOCK=512")
    assert unspecialized_alignment(impure, "bucket_kernel") is None


@pytest.mark.slow
def test_flag_widens_the_ptx_accesses(rw, tmp_path):
    # compiled for sm_90 on CPU: element-wide (4-byte, predicated) accesses before, 16-byte v4 after
    from tritondx.tools.task.capture_job import capture_ir
    _, (p,) = rw.proposals("unspecialized_bucket", "alignment_hints", detector="missing_alignment_info")
    cand = tmp_path / "cand.py"
    cand.write_text(p.source)
    widths = {}
    for label, task in (("initial", rw.task_path("unspecialized_bucket")), ("candidate", cand)):
        m, err = capture_ir(str(task), tmp_path / label, "cuda:90", False)
        assert m is not None, err
        ptx = "\n".join(f.read_text() for f in sorted((tmp_path / label).glob("*.ptx")))
        widths[label] = (len(re.findall(r"\b(?:ld|st)\.global\.v4\.b32", ptx)),
                         len(re.findall(r"\b(?:ld|st)\.global\.b32", ptx)))
    assert widths["initial"][0] == 0 and widths["initial"][1] >= 8
    assert widths["candidate"][0] >= 2 and widths["candidate"][1] == 0
