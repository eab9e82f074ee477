"""Run outputs: the optimized task file, report.json, report.md and report.html (tools/report/html.py)."""

from __future__ import annotations

import difflib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from tritondx.tools.records.evidence import TIERS
from tritondx.tools.run import phases
from tritondx.tools.run.host import process_cpu_seconds
from tritondx.tools.report.checked import checked_md, tolerance_text
from tritondx.tools.report.closure import ClosureRow, close_findings, closure_md
from tritondx.tools.report.text import clip, evidence_heading


def screened(v: dict[str, Any]) -> bool:
    """A candidate that passed the screen (listed shapes) and got no full checks (tools/verify/staged.py)."""
    return bool(v.get("passed")) and v.get("scope") == "screen"


def unchecked(v: dict[str, Any]) -> bool:
    """A candidate the no-op verifier passed without running it (tools/verify/interface.py): never verified."""
    return v.get("scope") == "noop"


def build_report(run_dir: Path, state: dict[str, Any], wall: float, analysis_nodes: tuple[str, ...] = (),
                 recheck: dict[str, list[dict[str, Any]]] | None = None, catalog: frozenset[str] = frozenset()
                 ) -> dict[str, Any]:
    """report.json's content from the run's records. ``analysis_nodes``: the nodes whose seconds are the diagnosis's;
    ``recheck``: the findings each tier's detectors report on the best version (``tools/evidence/recheck.py``), None
    where they were not re-run; ``catalog``: the rewrite families there are (the closure names those it lacks)."""
    # the judge's (or a person's) verdict per candidate, and a later check that rejected it (the bench's, the
    # hardware counters'): that one is what the table shows
    verifs = {v["candidate_id"]: v for v in state.get("verifications", [])
              if v.get("check", "judge") in ("judge", "person")}
    later = {v["candidate_id"]: v for v in state.get("verifications", [])
             if v.get("check") in ("timing", "hardware") and not v.get("passed")}
    meas = {m["id"]: m for m in state.get("measurements", [])}
    candidates = []
    for c in state.get("candidates", []):
        v = later.get(c["id"]) or verifs.get(c["id"], {})
        m = meas.get(c["id"])
        candidates.append({k: c[k] for k in ("id", "round", "tier", "family", "params", "description",
                                             "motivated_by", "prediction", "path", "parent")} |
                          # None where checked on the listed shapes only (timed, not faster): never "verified"
                          {"verified": None if screened(v) or unchecked(v) else v.get("passed"),
                           "screened": screened(v), "unchecked": unchecked(v),
                           "rejection": v.get("klass"), "reason": v.get("reason"),
                           "coverage": (verifs.get(c["id"]) or {}).get("coverage") or [], "measurement": m,
                           # the judge's time on it (``judge.candidate.STEPS``; the last, fullest verification)
                           "verify_seconds": (verifs.get(c["id"]) or {}).get("seconds"),
                           "verify_steps": (verifs.get(c["id"]) or {}).get("steps") or {}})
    best = state.get("best") or {}
    measured = bool(best.get("measured"))
    db = run_dir / "checkpoints.sqlite"
    closure = closed_findings(state, candidates, recheck, catalog)
    return {
        "task": state.get("task_name"), "task_path": state.get("task_path"), "backend": state.get("backend"),
        "target": state.get("target"), "kernel_class": state.get("kernel_class"),
        "mode": (state.get("config") or {}).get("mode"), "status": state.get("status"),
        # who checked the candidates: "judge", or "noop" (nothing ran: no candidate is called verified)
        "verifier": (state.get("config") or {}).get("verifier", "judge"),
        "tiers_used": [t for t in TIERS if t in set(state.get("tiers_done", []))],
        "rounds": state.get("round", 0),
        "best": best, "speedup": best.get("speedup") if measured else None,
        "speed": "measured" if measured else "not measured",
        "findings": state.get("findings", []), "candidates": candidates, "decisions": state.get("decisions", []),
        "closure": [r.model_dump() for r in closure], "family_attempts": state.get("family_attempts", []),
        "best_rule": best_rule(state), "tolerances": tolerance_text(state.get("probe") or {}),
        "insufficient": sorted(set(state.get("insufficient", []))),
        "checkpoint_db_bytes": sum(p.stat().st_size for p in run_dir.glob("checkpoints.sqlite*")) if db.exists()
        else None,
        "artifacts": state.get("artifacts", {}), "llm_usage": state.get("llm_usage"),
        "measurements": state.get("measurements", []),
        "final_profile": state.get("final_profile"),
        "tune": state.get("tune", []),
        # the cost ledger (tools/run/phases.py ``report_ledger``): seconds per node and phase, of the device jobs and
        # their device holds, the run's wall, CPU seconds of its process and jobs (tools/run/host.py), and the wall
        # seconds of the nodes that gather the tiers' evidence (the caller names them)
        "cost": phases.report_ledger(state.get("cost"), wall, process_cpu_seconds(), analysis_nodes),
    }


def closed_findings(state: dict[str, Any], candidates: list[dict[str, Any]],
                    recheck: dict[str, list[dict[str, Any]]] | None, catalog: frozenset[str]) -> list[ClosureRow]:
    """Each finding fixed (gone from ``recheck``) / tried / open (tools/report/closure.py)."""
    best_id = (state.get("best") or {}).get("id") or "initial"
    ended = [d for d in state.get("decisions", []) if d.get("kind") == "route"]
    if (state.get("config") or {}).get("mode") == "diagnose":
        why = "diagnose mode (no rewriting)"
    else:
        why = ended[-1].get("reason", "") if ended else ""
    return close_findings(state.get("findings", []), candidates, state.get("family_attempts", []), set(catalog),
                          best_id, recheck, why)


def best_rule(state: dict[str, Any]) -> str:
    """How the result was chosen, in one sentence (the report's first lines)."""
    best = state.get("best") or {}
    if best.get("measured"):
        return ("timed side by side with the initial kernel and the previous best on the device (interleaved "
                "rounds); a candidate replaces the best only when it is faster beyond the measured spread")
    return best.get("rule") or ("speed not measured: no candidate is claimed faster, the result is the initial "
                                "kernel")


def _profile_md(report: dict[str, Any]) -> list[str]:
    """Time, spread, roofline fraction and hardware counters of the initial and the best kernel."""
    meas = report.get("measurements") or []
    best = report.get("best") or {}
    rows = []
    init = next((m for m in reversed(meas) if m.get("family") == "initial"), None)
    bm = next((m for m in meas if m["id"] == best.get("id")), None)
    fp = report.get("final_profile") or {}
    kernels = fp.get("kernels") or {}
    if not init and not kernels:
        return []
    out = ["## Measured profile: initial vs best", "",
           "| kernel | time (us) | spread | roofline | ncu kernel | DRAM % | SM % | occupancy % | L2 hit % | top stalls |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for label, m in (("initial", init), ("best", bm if best.get("id") not in (None, "initial") else None)):
        if m is None and label not in kernels:
            continue
        t = f"{m['median_ms'] * 1e3:.1f}" if m else "-"
        sp = f"{m['spread']:.1%}" if m else "-"
        rf = f"{m['roofline_fraction']:.0%}" if m and m.get("roofline_fraction") else "-"
        ks = kernels.get(label) or [{}]
        for i, k in enumerate(ks):
            def f(key):
                v = k.get(key)
                return f"{v:.0f}" if isinstance(v, (int, float)) else "-"
            stalls = ", ".join(f"{n} {v:.2f}" for n, v in k.get("top_stalls", [])) or "-"
            first = i == 0
            rows.append(f"| {label if first else ''} | {t if first else ''} | {sp if first else ''} | "
                        f"{rf if first else ''} | {k.get('kernel', '-')} | {f('dram_pct')} | {f('sm_pct')} | "
                        f"{f('achieved_occupancy_pct')} | {f('l2_hit_pct')} | {stalls} |")
    out += rows
    if fp and fp.get("ncu") != "ok":
        out.append(f"\nncu: {fp.get('ncu')}")
    elif not fp:
        out.append("\nncu: no counters read in this run (no CUDA backend, or --no-ncu)")
    return out + [""]


def _hardware_md(best: dict[str, Any]) -> list[str]:
    """The hardware check of the best's claim (ncu kernel time, separate processes), as it came out."""
    hw = best.get("hardware")
    if not hw:
        return []
    state = "confirmed" if hw.get("confirmed") else "NOT confirmed (the speedup stands on the bench alone)"
    return [f"- hardware check of the speedup: {state}: {hw.get('note') or ''}"]


def _tune_md(report: dict[str, Any]) -> list[str]:
    """The tuner's runs: each one compact block (tools/tune/run.py ``table``)."""
    out = []
    for t in report.get("tune") or []:
        if t.get("table"):
            out += [f"## Launch search (round {t['round']}, on {t['subject']})", "", t["table"], ""]
    return out


def _cost_line(cost: dict[str, float] | None) -> str:
    """Wall, device and CPU seconds of the run, from its ledger."""
    jobs, held = phases.device(cost)
    c = phases.cpu(cost)
    return (f"- wall: {phases.wall(cost):.1f} s, device jobs: {jobs:.1f} s (holding the device: {held:.1f} s)"
            + (f"; CPU: {c.get('self', 0.0):.0f} s in the run's process, "
               f"{c.get('children', 0.0) + c.get('live', 0.0):.0f} s in its jobs" if c else ""))


def _md(report: dict[str, Any], diff: str) -> str:
    lines = [f"# tritondx report: {report['task']}", ""]
    b = report["best"]
    if report["speed"] == "measured":
        lines.append(f"**Result**: best candidate `{b.get('id')}` ({b.get('family', 'initial')}) is "
                     f"**{report['speedup']:.2f}x** faster than the initial kernel "
                     f"({b.get('median_ms', 0) * 1e3:.1f} us, {b.get('roofline_fraction') or 0:.0%} of roofline), "
                     f"measured side by side on {report['backend']}.")
    elif b.get("id") in (None, "initial") and not report["candidates"]:
        lines.append("**Result**: the initial kernel, unchanged: no candidate came out of the rewriter or the launch "
                     "search's screen, so nothing was timed against it.")
    elif b.get("id") in (None, "initial"):
        waiting = [c["id"] for c in report["candidates"] if c.get("verified")]
        lines.append(f"**Result**: the initial kernel, unchanged: speed not measured on `{report['backend']}` "
                     f"(no timing backend), so no candidate is claimed faster."
                     + (f" Verified candidates awaiting timing on a GPU: {', '.join(waiting)}." if waiting else ""))
    else:
        lines.append(f"**Result**: candidate `{b.get('id')}` ({b.get('family', 'initial')}) passed "
                     f"verification on `{report['backend']}`; speed not measured (no timing backend).")
    if report.get("verifier") == "noop":
        lines.append("**Not verified**: the no-op verifier ran in place of the judge (`verifier = 'noop'`, a test "
                     "setting): no candidate of this run was checked.")
    lines += ["", f"- kernel class: {report['kernel_class']}", f"- target: {report['target']}",
              f"- tiers used: {', '.join(report['tiers_used'])}", f"- rewrite rounds: {report['rounds']}",
              _cost_line(report.get("cost")),
              f"- how the result was chosen: {report.get('best_rule')}"] + _hardware_md(b) + [""]
    ph = phases.part(report.get("cost"), phases.PHASE)
    if ph:
        lines += ["## Where the time went", ""] + phases.table_md(ph, phases.wall(report.get("cost"))) + [""]
    lines += _profile_md(report)
    lines += _tune_md(report)
    lines += closure_md([ClosureRow(**r) for r in report.get("closure") or []])
    lines += [f"## {evidence_heading(report)}", ""]
    for tier in TIERS:
        fs = [f for f in report["findings"] if f["tier"] == tier]
        if not fs:
            continue
        lines.append(f"### {tier}")
        for f in fs:
            where = f" (line {f['source_line']}: `{f['source_text']}`)" if f.get("source_line") else ""
            read = f" [read from {f['subject']}]" if f.get("subject") not in (None, "initial") else ""
            lines.append(f"- **{f['detector']}**{' in ' + f['kernel'] if f.get('kernel') else ''}{read}: "
                         f"{f['message']}{where}")
            if f.get("ir_line"):
                lines.append(f"  - {f['stage']}: `{f['ir_line'][:160]}`")
            if f.get("suggests"):
                lines.append(f"  - suggests: {', '.join(f['suggests'])}")
        lines.append("")
    lines += ["## Candidates", "", "| id | tier | family | verified | time (us) | speedup | why |",
              "|---|---|---|---|---|---|---|"]
    for c in report["candidates"]:
        m = c.get("measurement") or {}
        t = f"{m['median_ms'] * 1e3:.1f}" if m else "-"
        s = f"{m['speedup']:.2f}x" if m else "-"
        ok = ("yes" if c["verified"] else "listed shapes only (not faster: no full checks)" if c.get("screened")
              else "not checked (no-op verifier)" if c.get("unchecked") else f"no ({c.get('rejection')})")
        lines.append(f"| {c['id']} | {c['tier']} | {c['family']} | {ok} | {t} | {s} | "
                     f"{clip(c['description'], 100).replace('|', '/')} |")
    lines += [""] + checked_md(report) + ["## Decisions", ""]
    for d in report["decisions"]:
        lines.append(f"- {d.get('node')}{' round ' + str(d['round']) if 'round' in d else ''}: "
                     f"{d.get('decision')} — {d.get('reason')}")
    if diff:
        lines += ["", "## Diff (initial -> best)", "", "```diff", diff, "```"]
    return "\n".join(lines) + "\n"


def write_outputs(run_dir: Path, state: dict[str, Any], wall: float, analysis_nodes: tuple[str, ...] = (),
                  recheck: dict[str, list[dict[str, Any]]] | None = None, catalog: frozenset[str] = frozenset(),
                  recheck_seconds: float = 0.0) -> dict[str, Any]:
    """The run's files from its records (``build_report`` says what the rest is); the ``report`` phase is the
    writer's seconds and the caller's ``recheck_seconds``."""
    t0 = time.monotonic() - recheck_seconds
    report = build_report(run_dir, state, wall, analysis_nodes, recheck, catalog)
    best = state.get("best") or {}
    initial = Path(state["task_path"])
    best_path = Path(best.get("path") or initial)
    if report["mode"] != "diagnose":
        shutil.copyfile(best_path, run_dir / "optimized_task.py")
    diff = "".join(difflib.unified_diff(initial.read_text().splitlines(True), best_path.read_text().splitlines(True),
                                        "initial", "optimized"))
    # the report's own phase: building it (the best version's detector re-run included), written last
    own = {phases.PHASE + phases.REPORT: round(time.monotonic() - t0, 3)}
    report["cost"] = dict(sorted({**report["cost"], **own}.items()))
    (run_dir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (run_dir / "report.md").write_text(_md(report, diff))
    try:
        from tritondx.tools.report.html import write_run_html
        write_run_html(run_dir, report, diff)
    except Exception as exc:  # the HTML page is a view of report.json: never lose a run over it
        import structlog
        structlog.get_logger("tritondx").warning("report_html_failed", error=f"{type(exc).__name__}: {exc}")
    return report
