"""Text helpers of the reports."""

from __future__ import annotations

from typing import Any


def clip(text: str | None, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary with an ellipsis, never mid-word (a single
    word longer than the limit is the one exception: it is cut, with the ellipsis)."""
    text = " ".join(str(text or "").split())
    if len(text) <= limit:
        return text
    room = max(1, limit - 1)
    cut = text[:room + 1].rsplit(" ", 1)[0] if " " in text[:room + 1] else text[:room]
    cut = cut[:room].rstrip(" ,;:-(")
    return cut + "…"


def unmeasured_cell(entry: dict) -> str:
    """A batch task's speedup cell when no speedup was measured (summary.md, the batch HTML, progress lines): a
    finished run on a backend that times nothing says "not measured", not "done" (read as a result)."""
    return "not measured" if entry.get("status") == "done" else str(entry.get("status"))


def evidence_heading(report: dict[str, Any]) -> str:
    """"Why it was slow" only over evidence of a run that measured its speed; otherwise what the evidence is."""
    if report.get("speed") == "measured":
        return "Why it was slow: evidence by tier"
    if report.get("mode") == "diagnose":
        return "Evidence by tier"
    return "Evidence by tier (speed not measured: what the detectors read, not a measured cause)"
