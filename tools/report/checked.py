"""What the verifier checked, for the report: tolerances, and per candidate the shapes, dtypes, value
stress and the branches it adds, from the judge's plan summary (``Verdict.coverage``, verify/plan/cases.py)."""

from __future__ import annotations

import re
from typing import Any

# a case line of the plan summary (CasePlan.summary):
# shape (3, 64) dtype float32 seed 756952145: derived: reaches silu_rowsum_kernel:10 True
# shape (5, 300) dtype float16 values large seed 415138167: value stress: reduction (sum): inputs x100
# shape (1000,) dtype float32 flipped to the CUDA side seed 222329766: listed in CHECK_SHAPES; device-kind tests flipped
CASE_LINE = re.compile(r"^shape (?P<shape>.+?) dtype (?P<dtype>\S+)(?: values (?P<values>\S+))?"
                       r"(?P<flipped> flipped to the CUDA side)? seed \d+: ")


def summarize(coverage: list[str]) -> list[str]:
    """One line for the cases (count, distinct shapes, dtypes, value stress), then every other line of
    the plan (dropped cases, added branches with the case that reached each side, notes) as it is."""
    shapes: list[str] = []
    dtypes: list[str] = []
    values: list[str] = []
    n = flipped = 0
    rest = []
    for line in coverage:
        m = CASE_LINE.match(line)
        if not m:
            rest.append(line)
            continue
        n += 1
        flipped += bool(m["flipped"])
        for seen, v in ((shapes, m["shape"]), (dtypes, m["dtype"]), (values, m["values"])):
            if v and v not in seen:
                seen.append(v)
    if not n:
        return rest
    head = f"{n} cases: shapes {', '.join(shapes)}; dtypes {', '.join(dtypes)}"
    head += f"; value stress: {', '.join(values)}" if values else "; no value stress"
    head += f"; {flipped} of them with the added device-kind tests flipped to their CUDA side" if flipped else ""
    return [head] + rest


def tolerance_text(probe: dict[str, Any]) -> str:
    """``float32 atol 1e-05 rtol 1e-05; ...`` from the probe (per output where the task gives several)."""
    per = probe.get("tolerance_entries") or {}
    parts = []
    for dtype, pair in (probe.get("tolerances") or {}).items():
        entries = per.get(dtype) or {}
        if len(entries) > 1:
            parts.append(f"{dtype} " + ", ".join(f"output {k}: atol {a:g} rtol {r:g}" for k, (a, r) in entries.items()))
        else:
            parts.append(f"{dtype} atol {pair[0]:g} rtol {pair[1]:g}")
    return "; ".join(parts)


def checked_md(report: dict[str, Any]) -> list[str]:
    """The report's "What was checked" section."""
    cands = [c for c in report.get("candidates") or [] if c.get("verified") is not None]
    if not cands and not report.get("tolerances"):
        return []
    out = ["## What was checked", ""]
    if report.get("tolerances"):
        out += [f"Tolerances: {report['tolerances']}.", ""]
    for c in cands:
        lines = summarize(c.get("coverage") or [])
        verdict = "verified" if c["verified"] else f"rejected ({c.get('rejection')})"
        if not lines:
            out.append(f"- {c['id']} ({verdict}): " + ((c.get("reason") or "")[:200] if not c["verified"]
                                                       else "no coverage recorded"))
            continue
        out.append(f"- {c['id']} ({verdict}): {lines[0]}")
        out += [f"  - {ln}" for ln in lines[1:]]
    return out + [""]
