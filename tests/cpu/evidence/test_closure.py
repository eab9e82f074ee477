"""Every finding closed: fixed (gone when its detector is re-run on the best version), tried (family and
verdict), or open (one line); a run does not end while a finding still open suggests a catalog family
that was never tried: the verifier routes one more round, whose rewriter tries that family first."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.records.evidence import Finding
from tritondx.agents.select import untried_route
from tritondx.tools.report.closure import close_findings, closure_md, untried_suggestions
from tritondx.tools.evidence.recheck import recheck_best
from tritondx.tools.rewrite.base import RewriteContext
from tritondx.tools.rewrite.expert import CATALOG, propose
from tritondx.tools.task.spec import load_task

ROOT = Path(__file__).resolve().parents[3]
CAT = set(CATALOG)


def _f(fid, detector, suggests, kernel=None, tier="triage", severity="medium", subject=None):
    return {"id": fid, "detector": detector, "tier": tier, "kernel": kernel, "suggests": suggests,
            "severity": severity, "subject": subject}


def test_each_finding_is_fixed_tried_or_open():
    findings = [_f("tb", "tiny_block", ["launch_config"], kernel="k"),
                _f("ml", "multiple_launches", ["fuse_passes", "fuse_launches"]),
                _f("un", "uncoalesced_access", ["tiling_2d_made_up"], kernel="k", tier="ir"),
                _f("kc", "kernel_class", [], severity="info")]
    candidates = [
        {"id": "r1c1", "family": "fuse_passes", "motivated_by": ["ml"], "verified": True,
         "measurement": {"speedup": 2.4}},
        {"id": "r1c2", "family": "launch_config", "motivated_by": ["tb"], "verified": False, "rejection": "mismatch"},
    ]
    attempts = [{"round": 1, "family": "fuse_launches", "outcome": "proposed_nothing", "proposed": 0}]
    # the detectors re-run on r1c1: tiny_block is gone from its source, multiple_launches too
    recheck = {"triage": [{"detector": "kernel_class", "kernel": None}], "ir": [
        {"detector": "uncoalesced_access", "kernel": "k"}]}
    rows = {r.finding: r for r in close_findings(findings, candidates, attempts, CAT, "r1c1", recheck, "budget")}
    assert rows["tb"].status == "fixed" and "gone from r1c1" in rows["tb"].detail
    assert rows["ml"].status == "fixed"
    assert rows["un"].status == "open" and "tiling_2d_made_up: not in the catalog" in rows["un"].detail
    assert rows["kc"].status == "open" and "informational" in rows["kc"].detail
    # without a re-run (best = initial), the same run reads: tried, with family and verdict
    rows = {r.finding: r for r in close_findings(findings, candidates, attempts, CAT, "initial", None, "")}
    assert rows["ml"].status == "tried" and "fuse_passes: r1c1 2.40x" in rows["ml"].detail
    assert "fuse_launches proposed nothing" in rows["ml"].detail
    assert rows["tb"].status == "tried" and "rejected (mismatch)" in rows["tb"].detail
    md = "\n".join(closure_md(list(rows.values())))
    assert "## Closed findings" in md and "| multiple_launches | triage | initial | tried |" in md


def test_recheck_runs_the_detector_on_the_best_version(tmp_path):
    task = ROOT / "examples" / "add_tiny_block.py"
    src = task.read_text()
    assert "BLOCK = 128" in src
    better = tmp_path / "best.py"
    better.write_text(src.replace("BLOCK = 128", "BLOCK = 1024"))
    found = recheck_best(str(better), ["triage"], None, tmp_path)
    assert "tiny_block" not in {f["detector"] for f in found["triage"]}
    found = recheck_best(str(task), ["triage"], None, tmp_path / "x") if (tmp_path / "x").mkdir() is None else None
    assert "tiny_block" in {f["detector"] for f in found["triage"]}


def test_an_untried_suggestion_routes_one_more_round_and_is_tried_first():
    findings = [_f("fl", "fixed_launch_config", ["launch_config", "autotune"])]
    cands = [{"id": "r1c1", "family": "launch_config", "motivated_by": ["fl"]}]
    # autotune was never reached (the round's candidate limit went to launch_config)
    attempts = [{"family": "launch_config", "outcome": "proposed"}, {"family": "autotune", "outcome": "not_reached"}]
    assert untried_suggestions(findings, cands, attempts, CAT) == {"fl": ["autotune"]}
    fams, why = untried_route(findings, cands, attempts, [])
    assert fams == ["autotune"] and "untried suggestions: autotune" in why
    # once the rewriter reached it (even if it proposed nothing), nothing is left untried
    done = attempts + [{"family": "autotune", "outcome": "proposed_nothing"}]
    assert untried_route(findings, cands, done, []) is None
    # a finding the expert no longer acts on (insufficient) does not hold the run
    assert untried_route(findings, cands, attempts, ["fl"]) is None
    # the rewriter tries the preferred family before higher-priority ones, and the trail says so
    spec = load_task(ROOT / "examples" / "add_tiny_block.py")
    from tritondx.tools.evidence.triage import triage
    _, found = triage(spec)
    ctx = RewriteContext(spec=spec, original=spec, kernel_class="elementwise", findings=found)
    trail: list[dict] = []
    assert [p.family for p in propose(ctx, limit=1, trail=trail)] == ["launch_config"]
    assert {"family": "autotune", "outcome": "not_reached", "proposed": 0} in trail
    ctx.prefer = {"autotune"}
    trail = []
    propose(ctx, limit=1, trail=trail)
    # autotune runs first now; on this kernel it has nothing to offer, and the trail says so
    assert trail[0] == {"family": "autotune", "outcome": "proposed_nothing", "proposed": 0}, trail


def test_the_run_does_not_end_with_an_untried_suggestion(tmp_path):
    from tritondx.agents.common import runtime_for
    from tritondx.agents.select import select_node
    from tritondx.config import RunConfig
    task = tmp_path / "task.py"
    task.write_text((ROOT / "examples" / "add_tiny_block.py").read_text())
    f = Finding(id="fl", detector="fixed_launch_config", tier="triage", stage="source", message="m",
                suggests=["launch_config", "autotune"]).model_dump()
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "interpreter", "target": "cuda:90",
             "tiers_done": ["triage", "profile", "ir", "compiler"],
             "findings": [f], "candidates": [{"id": "r1c1", "family": "launch_config", "motivated_by": ["fl"],
                                              "path": str(task)}],
             "pending": [], "round": 1, "rounds_at_tier": 1, "best": {"id": "initial", "path": str(task)},
             "family_attempts": [{"round": 1, "family": "autotune", "outcome": "not_reached", "proposed": 0}]}
    cmd = select_node(state, {"configurable": {"thread_id": "t"}},
                      runtime_for(RunConfig(backend="interpreter", max_rounds=6)))
    assert cmd.goto == "rewriter" and cmd.update["force_families"] == ["autotune"], cmd.update["decisions"]
    state["family_attempts"].append({"round": 2, "family": "autotune", "outcome": "proposed_nothing", "proposed": 0})
    cmd = select_node(state, {"configurable": {"thread_id": "t"}},
                      runtime_for(RunConfig(backend="interpreter", max_rounds=6)))
    assert cmd.goto == "report" and cmd.update["decisions"][0]["reason"] == "no tier left"
