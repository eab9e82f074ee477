"""grid_to_cores: a grid-stride kernel on a literal program count -> SM count x k programs; triage's
fixed_program_count fires on it (through a module constant, one call below launch()) and not on the
candidate; a one-tile-per-program kernel with a computed grid is left alone."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task, parse_task_source
from tritondx.tools.evidence.triage import triage


def _fixed(spec):
    return [f for f in triage(spec)[1] if f.detector == "fixed_program_count"]


def test_grid_sized_to_the_sms(rw, tmp_path):
    (f,) = _fixed(load_task(rw.task_path("grid_to_cores")))
    assert f.metric["programs"] == 32 and f.severity == "high" and "# GRID" in f.source_text
    props = [p for p in propose(rw.context_from("grid_to_cores", [])) if p.family == "grid_to_cores"]
    assert [p.params["per_sm"] for p in props] == [1, 4]
    for i, p in enumerate(props):
        call = next(n for n in ast.walk(rw.function(p.source, "_relu")) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Subscript))
        assert ast.unparse(call.func.slice) == f"(_tdx_sm_count(x) * {p.params['per_sm']},)"
        # the first through the sandboxed judge with all its checks (a rewrite's output passes the real verifier),
        # the other through the light check every rewrite test uses
        rw.verify("grid_to_cores", p.source, tmp_path, f"c{i}", full=i == 0)
        assert _fixed(parse_task_source(p.source, "cand.py")) == []


def test_program_count_argument_follows_the_grid(rw, tmp_path):
    src = rw.task_path("grid_to_cores").read_text().replace(
        "n, num_tiles, BLOCK", "n, num_tiles, nprog, BLOCK").replace("tl.num_programs(0)", "nprog").replace(
        "triton.cdiv(n, 256), BLOCK=256", "triton.cdiv(n, 256), NUM_PROGRAMS, BLOCK=256")
    from tritondx.tools.rewrite.grid_to_cores import cores_source
    out, _ = cores_source(src, 4)
    assert "triton.cdiv(n, 256), _tdx_sm_count(x) * 4, BLOCK=256" in out


def test_one_tile_per_program_left_alone(rw):
    assert _fixed(load_task(rw.task_path("cheap_math"))) == []
    _, props = rw.proposals("cheap_math", "grid_to_cores")
    assert props == []
