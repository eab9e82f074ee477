"""strided_args: a permute(...).contiguous() copy before a launch dropped when the kernel indexes with the
strides it is passed; triage's wrapper_copy fires on the launcher (one call below launch()) and not on the
candidate; a kernel that indexes the copy with flat offsets keeps it."""

from __future__ import annotations

from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.strided_args import strided_source
from tritondx.tools.task.spec import load_task, parse_task_source
from tritondx.tools.evidence.triage import triage


def _copies(spec):
    return [f for f in triage(spec)[1] if f.detector == "wrapper_copy"]


def test_copy_dropped(rw, tmp_path):
    (f,) = _copies(load_task(rw.task_path("strided_args")))
    assert "# COPY" in f.source_text and f.suggests == ["strided_args"]
    (p,) = [p for p in propose(rw.context_from("strided_args", [])) if p.family == "strided_args"]
    assert "    y = x.permute(0, 2, 1)  # COPY" in p.source
    rw.verify("strided_args", p.source, tmp_path)
    assert _copies(parse_task_source(p.source, "cand.py")) == []


def test_flat_indexing_keeps_the_copy(rw):
    src = rw.task_path("strided_args").read_text().replace(
        "y_ptr + b * s_b + r * s_r + cols * s_c", "y_ptr + (b * R + r) * C + cols")
    assert _copies(parse_task_source(src, "t.py"))      # the copy is still there to report
    assert strided_source(src) is None


def test_other_uses_keep_the_copy(rw):
    src = rw.task_path("strided_args").read_text().replace("    return out\n\n\ndef launch",
                                                           "    return out + 0 * y.sum()\n\n\ndef launch")
    assert strided_source(src) is None
