"""tl_dot keeps the kernel's precision (issue 37): fp32 multiply-and-sum products become tl.dot with
input_precision="ieee" even where the tolerance would let tf32 through; verified under the interpreter on a kernel
written for the test, and triage's mul_sum_dot finding is gone from the candidate."""

from __future__ import annotations

import ast

from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task, parse_task_source

TASK = "mulsum_matmul_fp32"


def test_fp32_products_stay_fp32(rw, tmp_path):
    spec = load_task(rw.task_path(TASK))
    (f,) = [f for f in triage(spec)[1] if f.detector == "mul_sum_dot"]
    ctx = rw.make_context(TASK)
    assert ctx.tolerances["float32"][1] >= 1e-3        # tf32 would pass the tolerance
    props = [p for p in propose(ctx, limit=8) if p.family == "tl_dot"]
    assert props and all(f.id in p.motivated_by for p in props)
    for i, p in enumerate(props):
        dots = [n for n in ast.walk(rw.function(p.source, "mm_kernel")) if isinstance(n, ast.Call)
                and ast.unparse(n.func) == "tl.dot"]
        assert dots and all(any(k.arg == "input_precision" and ast.literal_eval(k.value) == "ieee"
                                for k in d.keywords) for d in dots)
        assert "\"tf32\"" not in p.source and "allow_tf32=True" not in p.source
        assert p.params["precision"] == "ieee"
        assert not [g for g in triage(parse_task_source(p.source, "c.py"))[1] if g.detector == "mul_sum_dot"]
    rw.verify(TASK, props[0].source, tmp_path, "c0")
