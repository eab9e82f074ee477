"""Issue 38, reports: the findings table is short (one row per detector and verdict across kernels; what nothing
in the catalog acts on, and what is informational, one line each), "Why it was slow" stands only over measured
evidence, and no column is cut mid-word."""

import re

from tritondx.tools.report.closure import ClosureRow, close_findings, closure_md, group_closure
from tritondx.tools.report.html import closure_html, render_run_html
from tritondx.tools.report.text import clip
from tritondx.tools.report.writer import _md
from tritondx.tools.rewrite.expert import CATALOG

CAT = set(CATALOG)


def _f(fid, detector, suggests, kernel=None, tier="ir", severity="medium"):
    return {"id": fid, "detector": detector, "tier": tier, "kernel": kernel, "suggests": suggests,
            "severity": severity, "subject": None}


def _rows():
    kernels = ["row_max", "row_sum", "normalize"]
    findings = [_f(f"tb{i}", "tiny_block", ["launch_config"], k, tier="triage") for i, k in enumerate(kernels)]
    findings += [_f(f"rr{i}", "resource_report", [], k, severity="info") for i, k in enumerate(kernels)]
    findings += [_f("kc", "kernel_class", [], tier="triage", severity="info")]
    findings += [_f(f"sm{i}", "softmax_online", ["online_softmax"], k) for i, k in enumerate(kernels[:2])]
    findings += [_f("un", "uncoalesced_access", ["tiling_2d_made_up"], "normalize")]
    findings += [_f("np", "no_family", [], "normalize")]
    cands = [{"id": "r1c1", "family": "launch_config", "motivated_by": ["tb0", "tb1", "tb2"], "verified": True}]
    attempts = [{"round": 1, "family": "online_softmax", "outcome": "proposed_nothing"}]
    cat = CAT | {"online_softmax"}
    return close_findings(findings, cands, attempts, cat, "initial", None, "")


def test_the_findings_table_groups_kernels_and_lines_what_nothing_handles():
    rows = _rows()
    assert len(rows) == 11
    table, lines = group_closure(rows)
    assert table == [("tiny_block in 3 kernels: row_max, row_sum, normalize", "triage", "initial", "tried",
                      "launch_config: r1c1 verified, speed not measured")]
    assert lines == [
        "open: no rewrite in the catalog for softmax_online (2 kernels), uncoalesced_access, no_family; suggested "
        "online_softmax proposed nothing (preconditions do not hold here); suggested tiling_2d_made_up: not in the "
        "catalog",
        "informational (no rewrite suggested): resource_report (3 kernels), kernel_class"]
    md = "\n".join(closure_md(rows))
    assert md.count("\n| ") == 2  # the header and one row (the separator starts with "|-")
    assert "3 tried, 8 open" in md and "- open: no rewrite in the catalog for" in md
    assert "preconditions do not hold on this kernel" not in md
    page = closure_html([r.model_dump() for r in rows])
    assert page.count("<tr>") == 2 and "no rewrite in the catalog for softmax_online" in page


def test_an_old_report_s_rows_still_render():
    old = {"finding": "x", "tier": "ir", "detector": "d", "kernel": "k", "subject": None, "status": "open",
           "detail": "informational: no rewrite suggested"}
    assert "| d in k | ir | initial | open |" in "\n".join(closure_md([ClosureRow(**old)]))


def _report(speed):
    return {"task": "t", "mode": "optimize", "speed": speed, "speedup": 1.5 if speed == "measured" else None,
            "best": {"id": "r1c1", "family": "launch_config", "median_ms": 0.01, "roofline_fraction": 0.5},
            "backend": "interpreter", "kernel_class": "reduction", "target": "cuda:90", "tiers_used": ["triage"],
            "rounds": 1, "cost": {"wall": 10.0}, "best_rule": "x", "status": "done",
            "findings": [{"id": "tb", "tier": "triage", "detector": "tiny_block", "kernel": "k", "message": "m",
                          "stage": "source"}],
            "candidates": [{"id": "r1c1", "round": 1, "tier": "triage", "family": "launch_config", "verified": True,
                            "description": "raises BLOCK from 16 to 1024 so that each program covers a whole row "
                                           "of the input instead of one sixteenth of it, which the detector flagged",
                            "motivated_by": ["tb"]}],
            "decisions": [], "closure": [], "coverage": []}


def test_why_it_was_slow_only_over_measured_evidence():
    unmeasured = _md(_report("not measured"), "")
    assert "Why it was slow" not in unmeasured and "## Evidence by tier (speed not measured" in unmeasured
    assert "## Why it was slow: evidence by tier" in _md(_report("measured"), "")
    page = render_run_html(_report("not measured"), "")
    assert "Why it was slow" not in page and "Evidence by tier (speed not measured" in page


def test_the_why_column_is_never_cut_mid_word():
    md = _md(_report("not measured"), "")
    row = next(ln for ln in md.splitlines() if ln.startswith("| r1c1 "))
    why = row.rstrip(" |").rsplit(" | ", 1)[1]
    assert why.endswith("…")
    desc = _report("x")["candidates"][0]["description"]
    assert desc.startswith(why[:-1]) and desc[len(why) - 1] == " "  # the cut falls on a space
    for n in range(8, 120, 7):  # longer than its first word
        c = clip(desc, n)
        assert len(c) <= n and (c == desc or desc[len(c) - 1] in " ,;:-(")


def test_a_progress_line_is_never_cut_mid_word():
    from tritondx.logs import LINE_MAX, progress_line
    reason = "no tier left (no extra round: this backend measures no speed, so a round cannot beat the best)"
    line = progress_line(None, "", {"event": "decided", "node": "verifier", "goto": "__end__", "reason": reason,
                                    "best": "initial"})
    value = line.split("reason=", 1)[1].split(" best=", 1)[0]
    assert value.endswith("…") and reason.startswith(value[:-1]) and reason[len(value) - 1] == " "
    long = progress_line(None, "", {"event": "x " + "word " * 60})
    assert len(long) <= LINE_MAX and long.endswith("word…")


def test_a_run_with_no_candidate_says_so_not_that_speed_could_not_be_measured():
    """With no candidate at all the result line says nothing came out to time, not "no timing backend" (H100 batch_q
    of 2026-12-06: lightning_attn2's report on a GPU blamed a timing backend it had)."""
    r = _report("not measured") | {"best": {"id": "initial"}, "candidates": [], "backend": "cuda"}
    for text in (_md(r, ""), render_run_html(r, "")):
        assert "no candidate came out of the rewriter or the launch" in text and "no timing backend" not in text
    waiting = _report("not measured") | {"best": {"id": "initial"}}
    assert "no timing backend" in _md(waiting, "") and "awaiting timing on a GPU: r1c1" in _md(waiting, "")
