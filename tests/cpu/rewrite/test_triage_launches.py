"""Issue 37 item 1: grid and work-per-program evidence at triage, from the launches found by running the task
(tools/tune/record.py, here in the warm interpreter host, tests/cpu/tdx_interp.py, on kernels written for the tests): programs
vs SMs and elements per program name the pattern, and the first round acts on it (the matching family proposes,
citing the launch finding) without waiting for the IR tier."""

from __future__ import annotations

import json
import os

from tritondx.tools.evidence.triage import triage
from tritondx.tools.evidence.triage_launches import launch_findings
from tritondx.tools.rewrite.base import RewriteContext
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task
from tdx_interp import run_interpreted

SCRIPT = r'''
import importlib.util, json, sys, torch
from tritondx.tools.tune.record import recording
spec = importlib.util.spec_from_file_location("task", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
shape = tuple(json.loads(sys.argv[2]))
inputs = mod.make_inputs(shape if shape[0] != "small" else shape, torch.float32, 0, "cpu")
with recording() as rec:
    mod.launch(*inputs)
print(json.dumps([r.model_dump() for r in rec.launches]))
'''


def record(path, shape) -> list[dict]:
    out = run_interpreted(SCRIPT, str(path), json.dumps(list(shape)), timeout=300)   # tests/cpu/tdx_interp.py
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ctx(spec, launches):
    kclass, found = triage(spec, launches)
    return RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=found, dtypes=["float32"],
                          tolerances={"float32": (1e-5, 1e-5)}), found


def test_tiny_programs_found_at_triage_and_acted_on(rw):
    path = rw.task_path("tiny_rows_scatter")
    recs = record(path, (1024, 16))
    assert recs and recs[0]["grid"][0] == 1024 and recs[0]["constexprs"]["BLOCK_D"] == 16
    ctx, found = _ctx(load_task(path), recs)
    (work,) = [f for f in found if f.detector == "launch_work"]
    assert work.metric["programs"] == 1024 and work.metric["elements_per_program"] == 16
    assert work.metric["bytes_per_program"] == 64
    (tiny,) = [f for f in found if f.detector == "tiny_programs_launch"]
    assert "rows_per_program" in tiny.suggests
    props = [p for p in propose(ctx, limit=8) if p.family == "rows_per_program"]
    assert props and all(tiny.id in p.motivated_by for p in props)
    # the candidate's launches: rows per program capped by the recorded 1024 programs so that 2 per SM remain
    # (2 rows each: 512 programs of 2 x 16 elements), no tiny-programs finding
    assert all(p.params["max_rows"] == 2 for p in props)
    again = launch_findings(record_source(props[0].source, (1024, 16)), props[0].source)
    assert not [f for f in again if f.detector == "tiny_programs_launch"]
    (w2,) = [f for f in again if f.detector == "launch_work"]
    assert w2.metric["programs"] == 512 and w2.metric["elements_per_program"] == 32


def record_source(source: str, shape) -> list[dict]:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "cand.py")
        with open(p, "w") as f:
            f.write(source)
        return record(p, shape)


def test_small_grid_found_at_triage(rw):
    path = rw.task_path("grid_per_item")
    recs = record(path, (100, 33))
    ctx, found = _ctx(load_task(path), recs)
    (small,) = [f for f in found if f.detector == "launch_grid_small"]
    assert small.metric["programs"] == 48 and small.severity == "high"
    props = [p for p in propose(ctx, limit=8) if p.family == "grid_per_item"]
    assert props and small.id in props[0].motivated_by


def test_block_estimate_of_tiles():
    import ast
    from tritondx.tools.evidence.triage_launches import block_elements
    fn = ast.parse("def k(x, BM: tl.constexpr, BN: tl.constexpr):\n    r = tl.arange(0, BM)[:, None]\n"
                   "    c = tl.arange(0, BN)[None, :]\n").body[0]
    assert block_elements(fn, {"BM": 32, "BN": 64}) == 2048
    assert block_elements(fn, {"BM": 32}) is None


def test_block_estimate_of_halves():
    """Bounds written with constexprs and ``+ - * //`` (a rotary kernel's two halves of a head) are read; a bound
    that calls something is not."""
    import ast
    from tritondx.tools.evidence.triage_launches import block_elements
    fn = ast.parse("def k(x, D: tl.constexpr):\n    a = tl.arange(0, D // 2)\n    b = tl.arange(D // 2, D)\n"
                   "    c = tl.arange(0, D)\n").body[0]
    assert block_elements(fn, {"D": 128}) == 128
    fn = ast.parse("def k(x, D: tl.constexpr):\n    a = tl.arange(0, f(D))\n").body[0]
    assert block_elements(fn, {"D": 128}) is None
