"""Issue 38, CPU rounds: with --accept-unmeasured a later round builds on the verified pick of an earlier one, so a
CPU run combines two verified improvements; the report says the result is unmeasured and what it was built on."""

import json

import pytest

from .conftest import EXAMPLES


@pytest.mark.slow
def test_a_cpu_run_combines_two_verified_rewrites(cli, tmp_path):
    out = tmp_path / "run"
    r = cli("optimize", str(EXAMPLES / "matmul_no_dot.py"), "--backend", "interpreter", "--accept-unmeasured",
            "--out", str(out), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    best = rep["best"]
    cands = {c["id"]: c for c in rep["candidates"]}
    assert best["measured"] is False and best["id"] != "initial"
    assert best["built_on"], best  # a later round's candidate, written on the first pick
    first = best["built_on"][0]
    assert cands[best["id"]]["parent"] == best["built_on"][-1] and cands[first]["verified"]
    assert cands[best["id"]]["family"] != cands[first]["family"]
    src = (out / "optimized_task.py").read_text()
    assert "tl.dot(" in src and "num_stages=3" in src  # tl_dot (round 1) and pipelining (round 3) both there
    md = (out / "report.md").read_text()
    assert "speed not measured" in md and f"built on {first}" in md
