"""triage's loop findings: scalar_loop only for per-element loads, row_loop for one 1-D row block per
iteration, nothing for a K-loop over 2-D tiles (it used to be called a scalar loop)."""

from __future__ import annotations

from tritondx.tools.task.spec import load_task
from tritondx.tools.evidence.triage import triage


def _loop_findings(rw, name):
    _, fs = triage(load_task(rw.task_path(name)))
    return {(f.detector, f.source_line) for f in fs if f.detector in ("scalar_loop", "row_loop")}


def test_tile_k_loop_is_not_a_scalar_loop(rw):
    assert _loop_findings(rw, "tiled_k_loop") == set()


def test_per_element_loops_are_scalar_loops(rw):
    assert _loop_findings(rw, "scalar_loop_rmsnorm") == {("scalar_loop", 15), ("scalar_loop", 19)}
    assert _loop_findings(rw, "scalar_prefix_sum") == {("scalar_loop", 14)}


def test_row_block_loop_is_a_row_loop(rw):
    # one BLOCK_C row per iteration (r * stride_r): vectorize_scalar_loop's 2-D row tiles apply
    (f,) = [f for f in triage(load_task(rw.task_path("l2_reduce_sum_mid")))[1] if f.detector == "row_loop"]
    assert f.suggests == ["vectorize_scalar_loop"] and "one element" not in f.message
    assert f.source_text.startswith("for r in range(0, R)")
