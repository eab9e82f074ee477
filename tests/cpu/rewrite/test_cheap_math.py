"""cheap_math: libdevice pow with a small integer exponent -> an exact product, motivated by triage's
pow_constant_exponent; a runtime exponent and 0.5 are kept."""

from __future__ import annotations

import ast
import re

import pytest
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task
from tritondx.tools.evidence.triage import triage


def _pow_findings(rw, name):
    return [f for f in triage(load_task(rw.task_path(name)))[1] if f.detector == "pow_constant_exponent"]


def test_finding_fires_on_constant_exponents(rw):
    fs = _pow_findings(rw, "cheap_math")
    assert sorted(f.metric["exponent"] for f in fs) == [2, 3, 4]
    assert any("POW-2" in f.source_text for f in fs) and all(f.suggests == ["cheap_math"] for f in fs)
    assert _pow_findings(rw, "pow_general") == []


def test_pow_replaced_by_products(rw, tmp_path):
    ctx = rw.context_from("cheap_math", [])
    (p,) = [p for p in propose(ctx) if p.family == "cheap_math"]
    assert p.params["replaced"] == {"pow(x, 2)": 1, "pow(x, 3)": 1, "pow(x, 4)": 1}
    k = rw.function(p.source, "pow_poly_kernel")
    assert not [n for n in ast.walk(k) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("pow")]
    assert "cube = _tdx_pow3(y.to(tl.float32))" in ast.unparse(k)
    assert ast.unparse(rw.function(p.source, "_tdx_pow4").body[-1]) == "return x2 * x2"
    # the original cannot run under the interpreter (no libdevice there); the candidate matches the reference
    rw.verify("cheap_math", p.source, tmp_path)
    assert not _pow_findings_src(p.source)


def _pow_findings_src(source):
    from tritondx.tools.task.spec import parse_task_source
    return [f for f in triage(parse_task_source(source, "cand.py"))[1] if f.detector == "pow_constant_exponent"]


def test_general_pow_kept(rw):
    _, props = rw.proposals("pow_general", "cheap_math")
    assert props == []


@pytest.mark.slow
def test_powf_gone_from_ptx(rw, tmp_path):
    # compiled for sm_90 on CPU: powf's log/exp path (lg2.approx / ex2.approx) is in the original's PTX only
    from tritondx.tools.task.capture_job import capture_ir
    (p,) = [p for p in propose(rw.context_from("cheap_math", [])) if p.family == "cheap_math"]
    cand = tmp_path / "cand.py"
    cand.write_text(p.source)
    counts = {}
    for label, task in (("initial", rw.task_path("cheap_math")), ("candidate", cand)):
        m, err = capture_ir(str(task), tmp_path / label, "cuda:90", False)
        assert m is not None, err
        ptx = "\n".join(f.read_text() for f in sorted((tmp_path / label).glob("*.ptx")))
        counts[label] = len(re.findall(r"\b(?:lg2|ex2)\.approx", ptx))
    assert counts["initial"] >= 2 and counts["candidate"] == 0
