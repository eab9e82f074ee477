"""Honest reports (issue 18, points 2 and 3): without timing no candidate is claimed best; evidence comes
from the kernel it is about (IR findings map to their source lines and name the version they were read
from); a candidate cites a launch-value finding only when it changes that value the way the finding asks."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.records.evidence import Finding
from tritondx.tools.report.html import render_run_html
from tritondx.tools.rewrite.base import Proposal
from tritondx.tools.rewrite.expert import cited
from tritondx.tools.verify.select_untimed import unmeasured_choice

ROOT = Path(__file__).resolve().parents[3]


def test_without_timing_the_initial_kernel_stays_the_result():
    passed = [{"id": "r1c1", "path": "/p/r1c1.py", "family": "fuse_passes"},
              {"id": "r1c2", "path": "/p/r1c2.py", "family": "launch_config"}]
    initial = {"id": "initial", "path": "/p/initial.py", "median_ms": None, "speedup": 1.0}
    best = unmeasured_choice(passed, initial, interactive=False, accept_unmeasured=False)
    assert best["id"] == "initial" and best["path"] == "/p/initial.py" and best["measured"] is False
    assert best["awaiting_timing"] == ["r1c1", "r1c2"] and "speed not measured" in best["rule"]
    # a later round adds its candidates to the list, the result does not move
    best = unmeasured_choice([{"id": "r2c1", "path": "x", "family": "f"}], best, False, False)
    assert best["id"] == "initial" and best["awaiting_timing"] == ["r1c1", "r1c2", "r2c1"]
    # asked for (a person at the final approval, or --accept-unmeasured): the first verified, said so
    took = unmeasured_choice(passed, initial, interactive=False, accept_unmeasured=True)
    assert took["id"] == "r1c1" and "--accept-unmeasured" in took["rule"] and took["measured"] is False
    offered = unmeasured_choice(passed, initial, interactive=True, accept_unmeasured=False)
    assert offered["id"] == "r1c1" and "final approval" in offered["rule"]
    # --accept-unmeasured: a later round's candidate (written on the pick) replaces it, and says what it carries
    on = unmeasured_choice([{"id": "r2c1", "path": "y", "family": "g"}], took, False, True)
    assert on["id"] == "r2c1" and on["built_on"] == ["r1c1"] and "built on r1c1" in on["rule"]
    assert on["measured"] is False and "speed not measured" in on["rule"]
    # a person in the loop: the offered pick is not replaced
    assert unmeasured_choice([{"id": "r2c1", "path": "y", "family": "g"}], offered, True, False)["id"] == "r1c1"


def test_a_smaller_block_does_not_cite_a_too_small_block_finding():
    tiny = Finding(id="tb", detector="tiny_block", tier="triage", stage="source", kernel="k", message="BLOCK=256",
                   metric={"BLOCK": 256}, suggests=["launch_config"], wants={"BLOCK": "larger"})
    other = Finding(id="fl", detector="fixed_launch_config", tier="triage", stage="source", message="m",
                    suggests=["launch_config"])
    by_id = {f.id: f for f in (tiny, other)}

    def prop(block):
        return Proposal("launch_config", "src", {"k": {"BLOCK": block, "num_warps": 4}}, "d", ["tb", "fl"])
    assert cited(prop(128), by_id) == ["fl"]
    assert cited(prop(256), by_id) == ["fl"]
    assert cited(prop(1024), by_id) == ["tb", "fl"]


def test_ir_findings_quote_source_lines_and_the_version_they_were_read_from(tmp_path):
    from tritondx.tools.evidence.analysis import analyze_tier
    task = ROOT / "examples" / "softmax_three_pass.py"
    found, _, note = analyze_tier("ir", str(task), "cuda:90", tmp_path, 0)
    assert not note and found
    kernels = {f.kernel for f in found}
    src = task.read_text()
    assert kernels and all(f"def {k}(" in src for k in kernels)  # the original's kernels, not a template's
    for f in found:
        assert f.source_line is not None and f.source_text, f"{f.detector} has no source line"
        if f.ir_line:   # the line the quoted IR maps to, in the task's own file
            assert f.source_text == src.splitlines()[f.source_line - 1].strip()
    rr = next(f for f in found if f.detector == "resource_report")
    assert rr.source_text.startswith(f"def {rr.kernel}(")
    f = found[0].model_dump() | {"subject": "r1c1"}
    page = render_run_html({"task": "t", "findings": [f], "candidates": [], "decisions": [], "tiers_used": ["ir"],
                            "best": {}, "speed": "not measured"}, "")
    assert f"line {f['source_line']}: <code>" in page and "read from r1c1" in page


def test_the_expert_applies_the_direction_rule_to_its_proposals():
    from tritondx.tools.rewrite.base import RewriteContext
    from tritondx.tools.rewrite.expert import propose
    from tritondx.tools.task.spec import load_task
    from tritondx.tools.evidence.triage import triage
    spec = load_task(ROOT / "examples" / "add_tiny_block.py")
    _, found = triage(spec)
    tiny = next(f for f in found if f.detector == "tiny_block")
    ctx = RewriteContext(spec=spec, original=spec, kernel_class="elementwise", findings=found)
    props = [p for p in propose(ctx, limit=4) if p.family == "launch_config"]
    assert props and all(tiny.id in p.motivated_by for p in props)   # every config here enlarges BLOCK
    # the same finding, had it said the block was already larger than any proposal: cited by none
    (param, old), = ((k, v) for k, v in tiny.metric.items() if k in tiny.wants)
    tiny.metric[param] = 1 << 20
    props = [p for p in propose(ctx, limit=4) if p.family == "launch_config"]
    assert props and not any(tiny.id in p.motivated_by for p in props)
