"""absmax_norm: a host ``x.abs().max()`` (a temporary written and read back) becomes one ``vector_norm`` pass."""

from __future__ import annotations

from tritondx.tools.rewrite.absmax_norm import absmax_source
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.evidence.triage import triage
from tritondx.tools.task.spec import parse_task_source


def test_the_launchers_absmax_becomes_one_pass_and_the_candidate_passes(rw, tmp_path):
    found = [f for f in rw.make_context("absmax_norm").findings if f.detector == "abs_reduce_two_pass"]
    assert found and found[0].suggests == ["absmax_norm"] and "x.abs().max()" in found[0].message
    (p,) = [p for p in propose(rw.make_context("absmax_norm")) if p.family == "absmax_norm"]
    assert "absmax = _tdx_absmax(x)" in p.source and "def _tdx_absmax_partial" in p.source
    assert "    absmax = x.abs().max()\n    q = x" in p.source   # the reference (not timed) keeps its own
    rw.verify("absmax_norm", p.source, tmp_path)
    assert not [f for f in triage(parse_task_source(p.source, "cand.py"))[1] if f.detector == "abs_reduce_two_pass"]


def test_only_whole_tensor_maxima_on_the_launch_path_are_replaced():
    src = ("import torch\nimport triton\nimport triton.language as tl\n\n"
           "def launch(x, y, z):\n"
           "    return scales(x, y, z)\n\n"
           "def reference(x, y, z):\n"
           "    return x.abs().max()\n\n"
           "def scales(x, y, z):\n"
           "    a = torch.abs(x).amax()\n"
           "    b = y.abs().amax(dim=(0, 1))\n"   # per-dim maxima: left alone
           "    c = z.abs().max(dim=0)\n"          # values and indices: not an absolute maximum
           "    d = z.max()\n"                     # no abs
           "    return a, b, c, d\n")
    new, done = absmax_source(src)
    assert "a = _tdx_absmax(x)" in new and done == ["torch.abs(x).amax()"]
    assert "b = y.abs().amax(dim=(0, 1))" in new and "c = z.abs().max(dim=0)" in new and "d = z.max()" in new
    assert "    return x.abs().max()" in new          # reference: not on launch's path
    assert new.index("def _tdx_absmax") > new.index("import triton.language as tl")
    assert absmax_source(src.replace("import triton.language as tl\n", "")) is None
