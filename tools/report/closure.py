"""Every finding closed: fixed, tried, or open, with the evidence for each (the report's table).

Input is plain records (the run's findings, candidates, verifications, measurements, the rewriter's
per-family trail, and the findings a detector re-run found on the best version), so the same
computation serves the report writer, the verifier's routing and tests:

- **fixed**: the best version differs from the one the finding was read from, and the detector, run
  again on the best version's source/IR, no longer reports it (same detector on the same kernel; on
  any kernel when the finding's kernel is gone);
- **tried**: a candidate cited the finding: its family and its verdict (measured ratio, verified but
  not timed, or the rejection), plus any suggested family that proposed nothing;
- **open**: nothing in the catalog acted on it, said in one line (informational, no family suggested,
  suggested families absent from the catalog or that proposed nothing, or why a suggestion was never tried).

:func:`untried_suggestions` lists, per finding not fixed, the suggested catalog families that were never
tried nor reached by the rewriter: a run must not end while one remains (agents/select.py routes
one more round to the rewriter, which tries them first).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

Status = Literal["fixed", "tried", "open"]
# outcomes of the rewriter's per-family trail that count as "the family was tried on this finding"
REACHED = ("proposed", "nothing_new", "proposed_nothing")
OUTCOME_TEXT = {"nothing_new": "proposed only candidates already tried",
                "proposed_nothing": "proposed nothing (preconditions do not hold)",
                "skipped_unmeasured": "skipped: its last candidate could not be timed on this backend",
                "not_reached": "not reached (the round's candidate limit was used by earlier families)",
                "avoided_by_person": "not proposed: a person's feedback asked to avoid it",
                "covered_by_tuner": "not proposed: the tuner's search covered it (launch values timed in its job)"}


class ClosureRow(BaseModel):
    finding: str
    tier: str
    detector: str
    kernel: str | None = None
    subject: str | None = None
    status: Status
    detail: str
    # open rows only: "info" (informational, no rewrite suggested) or "unhandled" (nothing in the catalog acts
    # on it: no family suggested, or each suggested one is absent from the catalog or proposed nothing)
    kind: str | None = None
    proposed_nothing: list[str] = []   # suggested catalog families whose preconditions do not hold here
    not_in_catalog: list[str] = []     # suggested families the catalog lacks


def _verdict(c: dict[str, Any]) -> str:
    m = c.get("measurement") or {}
    if m.get("speedup"):
        return f"{m['speedup']:.2f}x" + (" (best)" if c.get("best") else "")
    if c.get("verified"):
        return "verified, speed not measured"
    if c.get("verified") is False:
        return f"rejected ({c.get('rejection') or 'failed'})"
    return "not verified"


def _group(cands: list[dict[str, Any]]) -> str:
    """'r1c1 1.31x (best), r1c2 0.97x' or 'r1c3, r1c4 verified, speed not measured; r2c1 rejected (mismatch)'."""
    by: dict[str, list[str]] = {}
    for c in cands:
        v = _verdict(c)
        if v[0].isdigit():
            by.setdefault(f"{c['id']} {v}", [])
        else:
            by.setdefault(v, []).append(c["id"])
    return "; ".join(f"{', '.join(ids)} {v}" if ids else v for v, ids in by.items())


def _still_there(f: dict[str, Any], recheck: list[dict[str, Any]]) -> bool:
    same = [g for g in recheck if g.get("detector") == f.get("detector")]
    if not f.get("kernel"):
        return bool(same)
    kernels = {g.get("kernel") for g in recheck if g.get("kernel")}
    if f["kernel"] in kernels:
        return any(g.get("kernel") == f["kernel"] for g in same)
    return bool(same)   # the kernel was replaced: fixed only if no kernel of the best version has it


def close_findings(findings: list[dict[str, Any]], candidates: list[dict[str, Any]],
                   attempts: list[dict[str, Any]], catalog: set[str], best_id: str = "initial",
                   recheck: dict[str, list[dict[str, Any]]] | None = None,
                   untried_reason: str = "") -> list[ClosureRow]:
    """One row per finding. ``candidates`` are the report's candidate records (with ``verified``,
    ``rejection``, ``measurement``); ``recheck`` maps a tier to the findings its detectors report on
    the best version (absent tier: not re-run); ``untried_reason`` says why the run ended with
    suggestions untried (e.g. the budget), when it did."""
    by_finding: dict[str, list[dict[str, Any]]] = {}
    for c in candidates:
        for fid in c.get("motivated_by") or []:
            by_finding.setdefault(fid, []).append({**c, "best": c["id"] == best_id})
    outcome: dict[str, str] = {}
    for a in attempts:   # the most telling outcome per family over the run
        order = ("proposed", "nothing_new", "proposed_nothing", "skipped_unmeasured", "not_reached",
                 "covered_by_tuner", "avoided_by_person")
        cur = outcome.get(a["family"])
        if cur is None or order.index(a["outcome"]) < order.index(cur):
            outcome[a["family"]] = a["outcome"]
    by_family: dict[str, list[dict[str, Any]]] = {}
    for c in candidates:
        by_family.setdefault(c.get("family", ""), []).append({**c, "best": c["id"] == best_id})
    rows = []
    for f in findings:
        row = dict(finding=f["id"], tier=f["tier"], detector=f["detector"], kernel=f.get("kernel"),
                   subject=f.get("subject"))
        tier_recheck = (recheck or {}).get(f["tier"])
        rechecked = tier_recheck is not None and (f.get("subject") or "initial") != best_id
        if rechecked and not _still_there(f, tier_recheck):
            rows.append(ClosureRow(**row, status="fixed",
                                   detail=f"gone from {best_id} ({f['detector']} re-run on its "
                                          f"{'source' if f['tier'] == 'triage' else 'IR'})"))
            continue
        cited = by_finding.get(f["id"], [])
        suggests = f.get("suggests") or []
        parts, tried = [], bool(cited)
        nothing, absent, other = [], [], False
        cited_by_fam: dict[str, list[dict[str, Any]]] = {}
        for c in cited:
            cited_by_fam.setdefault(c["family"], []).append(c)
        parts += [f"{fam}: {_group(cs)}" for fam, cs in cited_by_fam.items()]
        for fam in suggests:
            if fam in cited_by_fam:
                continue
            if by_family.get(fam):
                tried = True
                parts.append(f"{fam}: {_group(by_family[fam])} (made for other findings)")
            elif fam not in catalog:
                parts.append(f"{fam}: not in the catalog")
                absent.append(fam)
            elif fam in outcome:
                parts.append(f"{fam} {OUTCOME_TEXT.get(outcome[fam], outcome[fam])}")
                if outcome[fam] == "proposed_nothing":
                    nothing.append(fam)
                else:
                    other = True
            else:
                parts.append(f"{fam} not tried" + (f": {untried_reason}" if untried_reason else ""))
                other = True
        if tried:
            if rechecked:
                parts.append(f"still reported on {best_id}")
            rows.append(ClosureRow(**row, status="tried", detail="; ".join(parts)))
        elif not suggests:
            info = f.get("severity") == "info"
            rows.append(ClosureRow(**row, status="open", kind="info" if info else "unhandled",
                                   detail="informational: no rewrite suggested" if info
                                   else "no family in the catalog handles it"))
        else:
            rows.append(ClosureRow(**row, status="open", detail="; ".join(parts),
                                   kind=None if other else "unhandled", proposed_nothing=nothing,
                                   not_in_catalog=absent))
    return rows


def untried_suggestions(findings: list[dict[str, Any]], candidates: list[dict[str, Any]],
                        attempts: list[dict[str, Any]], catalog: set[str],
                        insufficient: set[str] | list[str] = ()) -> dict[str, list[str]]:
    """Finding id -> the catalog families it suggests that no candidate used and the rewriter never
    reached (findings already marked insufficient are left out: the expert does not act on them)."""
    used = {c.get("family") for c in candidates}
    reached = {a["family"] for a in attempts if a.get("outcome") in REACHED}
    out: dict[str, list[str]] = {}
    for f in findings:
        if f["id"] in set(insufficient):
            continue
        left = [fam for fam in f.get("suggests") or [] if fam in catalog and fam not in used and fam not in reached]
        if left:
            out[f["id"]] = left
    return out


def _names(rows: list[ClosureRow]) -> str:
    """'tiny_block (3 kernels), multiple_launches': each detector once, with how many kernels it was read in."""
    by: dict[str, set[str]] = {}
    for r in rows:
        by.setdefault(r.detector, set()).update([r.kernel] if r.kernel else [])
    return ", ".join(f"{d} ({len(ks)} kernels)" if len(ks) > 1 else d for d, ks in by.items())


def group_closure(rows: list[ClosureRow]) -> tuple[list[tuple[str, str, str, str, str]], list[str]]:
    """The findings table made short: rows that say the same of one detector in several kernels are one row
    ("tiny_block in 3 kernels: a, b, c"); informational findings and those nothing in the catalog acts on are
    one line each below it. Returns (table rows: name, tier, read from, status, how; lines)."""
    table: dict[tuple, list[ClosureRow]] = {}
    info = [r for r in rows if r.status == "open" and r.kind == "info"]
    unhandled = [r for r in rows if r.status == "open" and r.kind == "unhandled"]
    for r in rows:
        if r.status == "open" and r.kind in ("info", "unhandled"):
            continue
        table.setdefault((r.detector, r.tier, r.subject or "initial", r.status, r.detail), []).append(r)
    out = []
    for (det, tier, subject, status, detail), group in table.items():
        kernels = [r.kernel for r in group if r.kernel]
        name = det + (f" in {kernels[0]}" if len(kernels) == 1 else
                      f" in {len(kernels)} kernels: {', '.join(kernels)}" if kernels else "")
        out.append((name, tier, subject, status, detail))
    lines = []
    if unhandled:
        nothing = sorted({f for r in unhandled for f in r.proposed_nothing})
        absent = sorted({f for r in unhandled for f in r.not_in_catalog})
        lines.append(f"open: no rewrite in the catalog for {_names(unhandled)}"
                     + (f"; suggested {', '.join(nothing)} proposed nothing (preconditions do not hold here)"
                        if nothing else "")
                     + (f"; suggested {', '.join(absent)}: not in the catalog" if absent else ""))
    if info:
        lines.append(f"informational (no rewrite suggested): {_names(info)}")
    return out, lines


def closure_md(rows: list[ClosureRow]) -> list[str]:
    """The report.md section."""
    if not rows:
        return []
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("fixed", "tried", "open")}
    table, lines = group_closure(rows)
    out = ["## Closed findings", "", f"{counts['fixed']} fixed, {counts['tried']} tried, {counts['open']} open.", ""]
    if table:
        out += ["| finding | tier | read from | status | how |", "|---|---|---|---|---|"]
        out += [f"| {name} | {tier} | {subject} | {status} | {detail.replace('|', '/')} |"
                for name, tier, subject, status, detail in table]
        out.append("")
    out += [f"- {ln}" for ln in lines]
    return out + ([""] if lines else [])
