"""strided_args on the output side (issue 37, wrapper copies): ``return out.transpose(1, 2).contiguous()`` of an
output the kernel writes through its strides -> the output allocated in its final layout, the kernel writing
through the transposed view, no copy. On a kernel written for the test: triage's wrapper_copy names it, the
candidate verifies under the interpreter and the finding is gone from it; a kernel that writes the output with
flat offsets, or a launcher that reads the output again, keeps the copy."""

from __future__ import annotations

from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.strided_args import out_view_source
from tritondx.tools.task.spec import load_task, parse_task_source

TASK = "output_transpose_copy"


def _copies(spec):
    return [f for f in triage(spec)[1] if f.detector == "wrapper_copy"]


def test_output_copy_removed(rw, tmp_path):
    (f,) = _copies(load_task(rw.task_path(TASK)))
    assert f.metric["side"] == "output" and f.suggests == ["strided_args"]
    (p,) = [p for p in propose(rw.context_from(TASK, []), limit=8) if p.family == "strided_args"]
    assert f.id in p.motivated_by
    assert "return _tdx_out\n" in p.source and "out = _tdx_out.transpose(1, 2)" in p.source
    rw.verify(TASK, p.source, tmp_path)
    assert _copies(parse_task_source(p.source, "cand.py")) == []


def test_permute_and_reshape(rw, tmp_path):
    src = rw.task_path(TASK).read_text().replace(
        "return out.transpose(1, 2).contiguous()", "return out.permute(0, 2, 1, 3).reshape(B, S, H * D)").replace(
        "return x * torch.sigmoid(g)[None, None]", "return (x * torch.sigmoid(g)[None, None]).reshape(x.shape[0], x.shape[1], -1)")
    task = tmp_path / "perm_task.py"
    task.write_text(src)
    out, _ = out_view_source(src)
    assert "_tdx_out.permute(0, 2, 1, 3)" in out and "return _tdx_out.reshape(B, S, H * D)" in out
    cand = tmp_path / "cand.py"
    cand.write_text(out)
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    r = verify_candidate(str(task), str(cand), "c", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"


def test_copy_kept_where_it_must_be(rw):
    src = rw.task_path(TASK).read_text()
    flat = src.replace("out_ptr + b * so_b + h * so_h + s * so_s + d * so_d", "out_ptr + ((b * H + h) * S + s) * D + d")
    assert out_view_source(flat) is None                       # the kernel assumes the dense (B, H, S, D) layout
    reread = src.replace("    return out.transpose(1, 2).contiguous()",
                         "    out.mul_(1.0)\n    return out.transpose(1, 2).contiguous()")
    assert out_view_source(reread) is None                     # the launcher uses the output again
