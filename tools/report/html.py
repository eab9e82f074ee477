"""report.html: one self-contained page per run and per batch (no server, no external files).

Plots are inline SVG: matplotlib (the ``report`` extra) when it is installed, otherwise a small
hand-drawn SVG bar chart, so a page always has its plots. Run page: result, tier usage, roofline
position before/after, candidate outcomes and speedups, the evidence trail by tier (with IR and source
lines), decisions (the verifier's and a person's), the diff initial -> best and each candidate's diff.
Batch page: speedup distribution, roofline before/after per task, tier usage and ablation, the table.
"""

from __future__ import annotations

import difflib
import html
import io
import math
import time
from pathlib import Path
from typing import Any

from tritondx.tools.records.evidence import TIERS
from tritondx.tools.report.checked import checked_md
from tritondx.tools.report.text import clip, evidence_heading, unmeasured_cell
from tritondx.tools.run.phases import device, wall

# verification classes set by a person's answer, not by a check (agents/approval.py)
BY_PERSON = ("rejected_by_human", "dropped_for_feedback")

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dde3;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.result{background:#fff;border-left:5px solid #2a7;padding:10px 14px;margin:10px 0;font-size:15px}
.result.unmeasured{border-left-color:#999}
.meta{color:#57606a;font-size:13px}
.plots{display:flex;flex-wrap:wrap;gap:14px}
figure.plot{background:#fff;border:1px solid #d8dde3;border-radius:6px;margin:0;padding:8px;flex:0 1 360px;min-width:320px}
figure.plot svg{width:100%;height:auto}
figcaption{font-size:12px;color:#57606a;margin-top:4px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%}
th,td{border:1px solid #d8dde3;padding:4px 7px;text-align:left;vertical-align:top}th{background:#eef1f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre.diff{background:#fff;border:1px solid #d8dde3;padding:8px;overflow-x:auto;line-height:1.35}
.add{color:#116329;background:#dafbe1;display:block}.del{color:#82071e;background:#ffebe9;display:block}
.hunk{color:#0550ae;display:block}.ctx{display:block}
.tier{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;color:#fff}
.t-triage{background:#6e7781}.t-profile{background:#0969da}.t-ir{background:#8250df}.t-compiler{background:#bf3989}
.ok{color:#116329;font-weight:600}.bad{color:#82071e}.human{color:#9a6700;font-weight:600}
details{margin:6px 0}summary{cursor:pointer;font-size:13px}
.ir{color:#57606a}
"""


# ---------------------------------------------------------------- plots

def _mpl():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small and searchable
        return plt
    except ImportError:
        return None


def _svg_of(fig, plt) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _fallback_bars(labels: list[str], values: list[float], title: str, unit: str = "") -> str:
    """A dependency-free horizontal bar chart."""
    w, row = 520, 22
    h = 34 + row * max(1, len(values))
    top = max([v for v in values if v] + [1e-9])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" role="img">',
             f'<text x="8" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for i, (lab, v) in enumerate(zip(labels, values)):
        y = 30 + i * row
        bw = 0 if not v else max(1.0, (w - 220) * v / top)
        parts.append(f'<text x="8" y="{y + 14}" font-size="11">{html.escape(str(lab))[:28]}</text>'
                     f'<rect x="170" y="{y + 3}" width="{bw:.1f}" height="{row - 7}" fill="#4a8fd8"/>'
                     f'<text x="{174 + bw:.1f}" y="{y + 14}" font-size="11">{v:.3g}{unit}</text>')
    return "".join(parts) + "</svg>"


def _note_svg(title: str, note: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 520 90" role="img">'
            f'<text x="8" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>'
            f'<text x="8" y="55" font-size="12" fill="#57606a">{html.escape(note)}</text></svg>')


def _figure(pid: str, svg: str, caption: str) -> str:
    return f'<figure class="plot" id="plot-{pid}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def plot_bars(labels: list[str], values: list[float], title: str, ylabel: str, colors: list[str] | None = None,
              hlines: list[tuple[float, str]] = (), log: bool = False, unit: str = "") -> str:
    plt = _mpl()
    if plt is None:
        return _fallback_bars(labels, values, title, unit)
    fig, ax = plt.subplots(figsize=(5.6, 3.0))
    ax.bar(range(len(values)), values, color=colors or "#4a8fd8")
    for y, c in hlines:
        ax.axhline(y, color=c, lw=0.8, ls="--")
    if log:
        ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center",
                       fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(title, fontsize=10)
    for i, v in enumerate(values):
        if v:
            ax.annotate(f"{v:.3g}{unit}", (i, v), ha="center", va="bottom", fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg_of(fig, plt)


def plot_roofline(rows: list[tuple[str, float | None, float | None]], title: str, target: float | None = None) -> str:
    """Fraction of the measured roofline before and after, per row (task or bench)."""
    rows = [r for r in rows if r[1] is not None or r[2] is not None]
    if not rows:
        return _note_svg(title, "speed not measured on this backend: no roofline position")
    plt = _mpl()
    if plt is None:
        labels = [f"{n} {w}" for n, _, _ in rows for w in ("before", "after")]
        return _fallback_bars(labels, [100 * (v or 0) for _, b, a in rows for v in (b, a)], title, "%")
    fig, ax = plt.subplots(figsize=(5.6, max(2.2, 0.42 * len(rows) + 1.2)))
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [100 * (b or 0) for _, b, _ in rows], height=0.38, color="#b0b7c0",
            label="initial")
    ax.barh([y - 0.2 for y in ys], [100 * (a or 0) for _, _, a in rows], height=0.38, color="#2a7", label="optimized")
    ax.axvline(100, color="k", lw=0.8)
    if target:
        ax.axvline(100 * target, color="#c33", lw=0.8, ls="--", label=f"target {target:.0%}")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([n for n, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("% of roofline (measured copy bandwidth / matmul rate)", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg_of(fig, plt)


def plot_hist_speedups(speedups: list[float], title: str) -> str:
    plt = _mpl()
    if plt is None:
        edges = [0, 1, 1.5, 2, 5, math.inf]
        labels = ["<1x", "1-1.5x", "1.5-2x", "2-5x", ">5x"]
        counts = [sum(1 for s in speedups if lo <= s < hi) for lo, hi in zip(edges, edges[1:])]
        return _fallback_bars(labels, counts, title)
    fig, ax = plt.subplots(figsize=(5.6, 3.0))
    logs = [math.log2(s) for s in speedups if s and s > 0]
    lo, hi = min(logs + [0]) - 0.25, max(logs + [1]) + 0.25
    bins = max(4, min(24, len(logs)))
    ax.hist(logs, bins=bins, range=(lo, hi), color="#4a8fd8", edgecolor="white")
    ax.axvline(0, color="k", lw=0.8)
    ax.axvline(1, color="#2a7", lw=0.8, ls="--", label="2x")
    if speedups:
        g = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        ax.axvline(math.log2(g), color="#c33", lw=1, label=f"geomean {g:.2f}x")
    ticks = [t for t in range(math.floor(lo), math.ceil(hi) + 1)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{2 ** t:g}x" for t in ticks], fontsize=8)
    ax.set_xlabel("speedup over the initial kernel (log scale)", fontsize=8)
    ax.set_ylabel("tasks", fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg_of(fig, plt)


# ---------------------------------------------------------------- pieces

def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def diff_html(diff: str) -> str:
    if not diff.strip():
        return '<pre class="diff"><span class="ctx">(no change)</span></pre>'
    out = []
    for line in diff.splitlines():
        cls = ("hunk" if line.startswith("@@") else "ctx" if line.startswith(("+++", "---")) else
               "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx")
        out.append(f'<span class="{cls}">{_e(line) or "&nbsp;"}</span>')
    return '<pre class="diff">' + "".join(out) + "</pre>"


def _tier(t: str) -> str:
    return f'<span class="tier t-{_e(t)}">{_e(t)}</span>'


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="generator" content="tritondx"><style>{_CSS}</style></head><body><main>{body}'
            f'<p class="meta">written by tritondx {time.strftime("%Y-%m-%d %H:%M")}; self-contained page</p>'
            '</main></body></html>\n')


def _read(path: str | None) -> str | None:
    try:
        return Path(path).read_text() if path else None
    except OSError:
        return None


def candidate_diffs(report: dict[str, Any]) -> dict[str, str]:
    """Each candidate against its parent (the best version it was built on), where the files still exist."""
    paths = {c["id"]: c.get("path") for c in report.get("candidates", [])}
    paths["initial"] = report.get("task_path")
    out = {}
    for c in report.get("candidates", []):
        new, old = _read(c.get("path")), _read(paths.get(c.get("parent") or "initial"))
        if new is not None and old is not None:
            out[c["id"]] = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                        c.get("parent") or "initial", c["id"]))
    return out


def _roofline_rows(report: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    b = report.get("best") or {}
    meas = report.get("measurements") or []
    before = next((m.get("roofline_fraction") for m in meas if m.get("family") == "initial"), None)
    if before is None and b.get("roofline_fraction") and b.get("speedup"):
        before = b["roofline_fraction"] / b["speedup"]  # fraction scales with 1/time
    after = b.get("roofline_fraction") if b.get("measured") else None
    if before is None and after is None:
        return []
    return [(report.get("task") or "kernel", before, after or before)]


# ---------------------------------------------------------------- run page

def closure_html(rows: list[dict[str, Any]]) -> str:
    """Every finding fixed / tried / open (tools/report/closure.py), grouped as in report.md."""
    if not rows:
        return ""
    from tritondx.tools.report.closure import ClosureRow, group_closure
    table, lines = group_closure([ClosureRow(**r) for r in rows])
    cls = {"fixed": "ok", "tried": "", "open": "bad"}
    body = "".join(f"<tr><td><b>{_e(name)}</b></td><td>{_tier(tier)}</td><td>{_e(subject)}</td>"
                   f"<td class='{cls[status]}'>{_e(status)}</td><td>{_e(detail)}</td></tr>"
                   for name, tier, subject, status, detail in table)
    counts = ", ".join(f"{sum(1 for r in rows if r['status'] == s)} {s}" for s in ("fixed", "tried", "open"))
    tab = (f"<table><tr><th>finding</th><th>tier</th><th>read from</th><th>status</th><th>how</th></tr>{body}</table>"
           if table else "")
    notes = "".join(f"<li>{_e(ln)}</li>" for ln in lines)
    return f"<h2>Closed findings</h2><p class='meta'>{counts}</p>{tab}" + (f"<ul>{notes}</ul>" if notes else "")


def render_run_html(report: dict[str, Any], diff: str, cand_diffs: dict[str, str] | None = None) -> str:
    cand_diffs = cand_diffs or {}
    b = report.get("best") or {}
    measured = report.get("speed") == "measured"
    if report.get("mode") == "diagnose":
        result = (f"Diagnosis of <b>{_e(report.get('task'))}</b>: {len(report.get('findings', []))} findings over "
                  f"{len(report.get('tiers_used', []))} tiers (no rewriting).")
    elif measured:
        result = (f"Best candidate <code>{_e(b.get('id'))}</code> ({_e(b.get('family', 'initial'))}) is "
                  f"<b>{report['speedup']:.2f}x</b> faster than the initial kernel "
                  f"({(b.get('median_ms') or 0) * 1e3:.1f} us, {b.get('roofline_fraction') or 0:.0%} of roofline), "
                  f"measured side by side on {_e(report.get('backend'))}.")
    elif b.get("id") in (None, "initial") and not report.get("candidates"):
        result = ("The initial kernel, unchanged: no candidate came out of the rewriter or the launch search's "
                  "screen, so nothing was timed against it.")
    elif b.get("id") in (None, "initial"):
        result = (f"The initial kernel, unchanged: speed not measured on <code>{_e(report.get('backend'))}</code> "
                  "(no timing backend), so no candidate is claimed faster.")
    else:
        result = (f"Candidate <code>{_e(b.get('id'))}</code> ({_e(b.get('family', 'initial'))}) passed "
                  f"verification on <code>{_e(report.get('backend'))}</code>; speed not measured (no timing backend).")
    result += f"<br><span class='meta'>How the result was chosen: {_e(report.get('best_rule'))}</span>" \
        if report.get("best_rule") else ""
    if report.get("verifier") == "noop":
        result += ("<br><span class='bad'>Not verified: the no-op verifier ran in place of the judge (a test "
                   "setting): no candidate of this run was checked.</span>")
    parts = [f"<h1>tritondx report: {_e(report.get('task'))}</h1>",
             f'<div class="result{"" if measured else " unmeasured"}">{result}</div>',
             f'<p class="meta">kernel class {_e(report.get("kernel_class"))} · target {_e(report.get("target"))} · '
             f'tiers used {" ".join(_tier(t) for t in report.get("tiers_used", []))} · rewrite rounds '
             f'{_e(report.get("rounds"))} · wall {wall(report.get("cost")):.1f} s · device jobs '
             f'{device(report.get("cost"))[0]:.1f} s · status {_e(report.get("status"))}</p>']
    # plots
    findings = report.get("findings", [])
    counts = [sum(1 for f in findings if f.get("tier") == t) for t in TIERS]
    used = set(report.get("tiers_used", []))
    tier_svg = plot_bars(list(TIERS), counts, "Evidence by tier (findings)", "findings",
                         colors=["#2a7" if t in used else "#ccc" for t in TIERS])
    cands = report.get("candidates", [])
    plots = [_figure("tiers", tier_svg, "tier usage: findings per tier; grey = tier not run"),
             _figure("roofline", plot_roofline(_roofline_rows(report), "Roofline position: before / after",
                                               (report.get("config") or {}).get("target_fraction", 0.8)),
                     "fraction of the measured roofline, initial vs best")]
    if any(c.get("measurement") for c in cands):
        ms = [c for c in cands if c.get("measurement")]
        plots.append(_figure("speedups", plot_bars(
            [c["id"] for c in ms], [c["measurement"]["speedup"] for c in ms], "Speedup per measured candidate",
            "x initial", colors=["#2a7" if c["id"] == b.get("id") else "#4a8fd8" for c in ms],
            hlines=[(1.0, "k")], unit="x"), "each candidate timed side by side with the initial kernel"))
    else:
        rounds = sorted({c["round"] for c in cands})
        labels, vals = [], []
        for r in rounds:
            rc = [c for c in cands if c["round"] == r]
            labels += [f"r{r} passed", f"r{r} failed", f"r{r} by person"]
            vals += [sum(1 for c in rc if c.get("verified")),
                     sum(1 for c in rc if c.get("verified") is False and c.get("rejection") not in BY_PERSON),
                     sum(1 for c in rc if c.get("rejection") in BY_PERSON)]
        plots.append(_figure("outcomes", plot_bars(labels or ["none"], vals or [0], "Candidate outcomes per round",
                                                   "candidates"), "verified, rejected by checks, rejected by a person"))
    parts.append('<h2>Plots</h2><div class="plots">' + "".join(plots) + "</div>")
    # evidence trail
    parts.append(f"<h2>{_e(evidence_heading(report))}</h2>")
    for t in TIERS:
        fs = [f for f in findings if f.get("tier") == t]
        if not fs:
            continue
        rows = []
        for f in fs:
            src = f"line {f['source_line']}: <code>{_e(f.get('source_text'))}</code>" if f.get("source_line") else ""
            ir = f'<div class="ir">{_e(f.get("stage"))}: <code>{_e((f.get("ir_line") or "")[:220])}</code></div>' \
                if f.get("ir_line") else ""
            read = f" · read from {_e(f['subject'])}" if f.get("subject") not in (None, "initial") else ""
            rows.append(f"<tr><td><b>{_e(f.get('detector'))}</b><br><span class='meta'>{_e(f.get('kernel'))}{read}</span>"
                        f"</td><td>{_e(f.get('message'))}{ir}</td><td>{src}</td>"
                        f"<td>{_e(', '.join(f.get('suggests') or []))}</td></tr>")
        parts.append(f"<h3>{_tier(t)} {len(fs)} finding(s)</h3><table><tr><th>detector</th><th>what</th>"
                     f"<th>source</th><th>suggests</th></tr>{''.join(rows)}</table>")
    parts.append(closure_html(report.get("closure") or []))
    # candidates and timings
    parts.append("<h2>Candidates and timings</h2><table><tr><th>id</th><th>round</th><th>tier</th><th>family</th>"
                 "<th>verified</th><th>time (us)</th><th>speedup</th><th>roofline</th><th>motivated by</th>"
                 "<th>description</th></tr>")
    for c in cands:
        m = c.get("measurement") or {}
        if c.get("verified"):
            ok = '<span class="ok">yes</span>'
        elif c.get("screened"):
            ok = '<span class="human">listed shapes only (not faster: no full checks)</span>'
        elif c.get("unchecked"):
            ok = '<span class="bad">not checked (no-op verifier)</span>'
        elif c.get("rejection") == "rejected_by_human":
            ok = '<span class="human">rejected by a person</span>'
        elif c.get("rejection") == "dropped_for_feedback":
            ok = '<span class="human">not verified: dropped for feedback</span>'
        else:
            ok = f'<span class="bad">no ({_e(c.get("rejection"))})</span>'
        star = " ★" if c["id"] == b.get("id") else ""
        parts.append(f"<tr><td><code>{_e(c['id'])}</code>{star}</td><td class='num'>{_e(c.get('round'))}</td>"
                     f"<td>{_tier(c.get('tier', ''))}</td><td>{_e(c.get('family'))}</td><td>{ok}</td>"
                     f"<td class='num'>{m['median_ms'] * 1e3:.1f}</td><td class='num'>{m['speedup']:.2f}x</td>"
                     f"<td class='num'>{(m.get('roofline_fraction') or 0):.0%}</td>" if m else
                     f"<tr><td><code>{_e(c['id'])}</code>{star}</td><td class='num'>{_e(c.get('round'))}</td>"
                     f"<td>{_tier(c.get('tier', ''))}</td><td>{_e(c.get('family'))}</td><td>{ok}</td>"
                     "<td>-</td><td>-</td><td>-</td>")
        parts[-1] += (f"<td>{_e(', '.join(c.get('motivated_by') or []))}</td>"
                      f"<td>{_e(clip(c.get('description'), 160))}"
                      f"{'<br><span class=bad>' + _e(clip(c.get('reason'), 200)) + '</span>' if c.get('verified') is False and c.get('reason') else ''}"
                      "</td></tr>")
    parts.append("</table>")
    checked = checked_md(report)  # what the verifier checked (tools/report/checked.py), as a list
    if checked:
        items = "".join(f"<li>{_e(ln.strip()[2:] if ln.strip().startswith('- ') else ln)}</li>"
                        for ln in checked[2:] if ln.strip())
        parts.append(f"<h2>What was checked</h2><ul>{items}</ul>")
    # decisions
    parts.append("<h2>Decisions</h2><table><tr><th>node</th><th>round</th><th>decision</th><th>reason</th></tr>")
    for d in report.get("decisions", []):
        who = ' class="human"' if d.get("kind") == "person" else ""
        parts.append(f"<tr><td{who}>{_e(d.get('node'))}</td><td class='num'>{_e(d.get('round', ''))}</td>"
                     f"<td>{_e(d.get('decision'))}{' ' + _e(d.get('candidate')) if d.get('candidate') else ''}</td>"
                     f"<td>{_e(d.get('reason'))}</td></tr>")
    parts.append("</table>")
    # diffs
    if report.get("mode") != "diagnose":
        parts.append("<h2>Diff: initial → best</h2>" + diff_html(diff))
    if cand_diffs:
        parts.append("<h2>Each candidate against the version it was built on</h2>")
        for cid, d in cand_diffs.items():
            parts.append(f"<details><summary><code>{_e(cid)}</code></summary>{diff_html(d)}</details>")
    return _page(f"tritondx: {report.get('task')}", "".join(parts))


def write_run_html(run_dir: Path, report: dict[str, Any], diff: str) -> Path:
    path = Path(run_dir) / "report.html"
    path.write_text(render_run_html(report, diff, candidate_diffs(report)))
    return path


# ---------------------------------------------------------------- batch page

def render_batch_html(results: list[dict[str, Any]], agg: dict[str, Any], meta: dict[str, Any]) -> str:
    done = sorted([r for r in results if r.get("speedup")], key=lambda r: r["speedup"])
    parts = [f"<h1>tritondx batch: {_e(meta.get('suite'))}</h1>",
             f'<p class="meta">device {_e(meta.get("device"))} · torch {_e(meta.get("torch"))} · triton '
             f'{_e(meta.get("triton"))} · backend {_e(meta.get("backend"))} · {_e(meta.get("date"))}</p>']
    if agg.get("geomean_speedup"):
        parts.append(f'<div class="result">{agg["tasks"]} tasks ({agg["measured"]} measured, {agg["failed"]} failed): '
                     f'geomean speedup <b>{agg["geomean_speedup"]:.2f}x</b>, median {agg["median_speedup"]:.2f}x; '
                     f'over 2x: {agg["over_2x"]}, over 5x: {agg["over_5x"]}'
                     + (f'; vs torch.compile {agg["geomean_vs_torch_compile"]:.2f}x'
                        if agg.get("geomean_vs_torch_compile") else "") + "</div>")
    else:
        parts.append(f'<div class="result unmeasured">{agg.get("tasks", len(results))} tasks; speed not measured '
                     f'({agg.get("failed", 0)} failed)</div>')
    tier_counts = [sum(1 for r in results if t in (r.get("tiers_used") or [])) for t in TIERS]
    abl = agg.get("ablation_geomean_by_tier") or {}
    plots = [
        _figure("speedup-dist", plot_hist_speedups([r["speedup"] for r in done], "Speedup distribution")
                if done else _note_svg("Speedup distribution", "no measured task"),
                "tasks by speedup over their initial kernel"),
        _figure("speedup-per-task", plot_bars([r["task"] for r in done], [r["speedup"] for r in done],
                                              "Speedup per task", "x initial (log)", log=True, hlines=[(1, "k"),
                                                                                                       (2, "#2a7")],
                                              colors=["#2a7" if r["speedup"] > 2 else "#999" for r in done], unit="x")
                if done else _note_svg("Speedup per task", "no measured task"), "sorted; dashed line at 2x"),
        _figure("roofline", plot_roofline([(r["task"], r.get("roofline_before"), r.get("roofline_after"))
                                           for r in done], "Roofline position: before / after"),
                "fraction of the measured roofline per task, initial vs optimized"),
        _figure("tiers", plot_bars(list(TIERS), tier_counts, "Tier usage", "tasks"),
                "tasks that needed each evidence tier"),
    ]
    if any(abl.values()):
        plots.append(_figure("ablation", plot_bars(list(abl), [v or 0 for v in abl.values()],
                                                   "Geomean speedup when stopping after each tier", "x", unit="x"),
                             "per-tier ablation from the candidates each run measured"))
    parts.append('<h2>Plots</h2><div class="plots">' + "".join(plots) + "</div>")
    parts.append("<h2>Tasks</h2><table><tr><th>task</th><th>class</th><th>initial (us)</th><th>optimized (us)</th>"
                 "<th>speedup</th><th>roofline before → after</th><th>eager (us)</th><th>compile (us)</th>"
                 "<th>tiers</th><th>rewrites</th><th>wall (s)</th><th>report</th></tr>")

    def us(x):
        return f"{x * 1e3:.1f}" if x else "-"

    for r in sorted(results, key=lambda r: r["task"]):
        rb, ra = r.get("roofline_before"), r.get("roofline_after")
        roof = f"{rb:.0%} → {ra:.0%}" if rb and ra else "-"
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else _e(unmeasured_cell(r))
        link = f'<a href="runs/{_e(r["task"])}/report.html">report</a>'
        parts.append(f"<tr><td>{_e(r['task'])}</td><td>{_e(r.get('kernel_class', '-'))}</td>"
                     f"<td class='num'>{us(r.get('initial_ms'))}</td><td class='num'>{us(r.get('optimized_ms'))}</td>"
                     f"<td class='num'>{sp}</td><td>{roof}</td><td class='num'>{us(r.get('torch_eager_ms'))}</td>"
                     f"<td class='num'>{us(r.get('torch_compile_ms'))}</td>"
                     f"<td>{' '.join(_tier(t) for t in r.get('tiers_used') or [])}</td>"
                     f"<td>{_e('+'.join(r.get('rewrites_applied') or []) or '-')}</td>"
                     f"<td class='num'>{r.get('wall_s') or 0:.0f}</td><td>{link}</td></tr>")
    parts.append("</table>")
    return _page(f"tritondx batch: {meta.get('suite')}", "".join(parts))


def write_batch_html(out: Path, results: list[dict[str, Any]], agg: dict[str, Any], meta: dict[str, Any]) -> Path:
    path = Path(out) / "report.html"
    path.write_text(render_batch_html(results, agg, meta))
    return path
