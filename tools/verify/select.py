"""Selection: which measured candidate is the round's best, and whether it measurably beats the
previous best (trusted side; reads the bench job's result)."""

from __future__ import annotations

from typing import Any

MIN_GAIN = 0.02  # a candidate must be at least 2% faster, however small the spread


def summarize_bench(result: dict, ids: list[str]) -> dict[str, dict]:
    """Per variant: geometric mean over bench shapes of median time, worst spread, roofline fraction."""
    out: dict[str, dict] = {}
    for vid in ids:
        meds, spreads, fracs = [], [], []
        for entry in result["shapes"]:
            v = entry["variants"].get(vid)
            if v:
                meds.append(v["median_ms"])
                spreads.append(v["spread"])
                fracs.append(v["roofline_fraction"] or 0.0)
        if meds:
            g = 1.0
            for x in meds:
                g *= x
            out[vid] = {"median_ms": g ** (1 / len(meds)), "spread": max(spreads),
                        "roofline_fraction": min(fracs), "impossible": any(
                            e["variants"].get(vid, {}).get("impossible") for e in result["shapes"])}
    return out


def beats(result: dict, summary: dict, cand: str, prev: str) -> str | None:
    """Why ``cand`` is measurably faster than ``prev`` in one bench result, or None. Either its time is
    below ``prev``'s by more than the larger spread of the two (medians over interleaved rounds), or it
    is faster by more than MIN_GAIN in every interleaved round on every shape: rounds are timed one
    after the other for all variants, so a drift of the host (launch-bound kernels under a busy batch)
    moves both alike. On the H200 (l2_foreach_add, 2026-11-30) the initial kernel's round medians
    were 199/168/109 us (spread 53%, its 8 launches waited on a loaded host) and a one-launch
    candidate's 88/87/87 us: faster in every round, yet rejected by the spread rule alone."""
    c, p = summary.get(cand), summary.get(prev)
    if not c or not p:
        return None
    noise = max(p["spread"], c["spread"], MIN_GAIN)
    if c["median_ms"] < p["median_ms"] * (1 - noise):
        return f"{p['median_ms'] / c['median_ms']:.2f}x, beyond the spread ({noise:.0%})"
    rounds = 0
    for entry in result["shapes"]:
        cv, pv = entry["variants"].get(cand), entry["variants"].get(prev)
        if not cv or not pv:
            return None
        cr, pr = cv.get("round_medians_ms") or [], pv.get("round_medians_ms") or []
        if len(cr) != len(pr) or len(cr) < 3 or any(x >= y * (1 - MIN_GAIN) for x, y in zip(cr, pr)):
            return None
        rounds = len(cr)
    return (f"{p['median_ms'] / c['median_ms']:.2f}x, faster in each of {rounds} interleaved rounds "
            f"(spread {noise:.0%})")


def measurements(summary: dict, passed: list[dict], round_no: int, prev: dict) -> tuple[list[dict], list[dict]]:
    """(measurement records of the passed candidates and of the initial kernel, candidates rejected as
    faster than the roofline allows)."""
    base = summary["initial"]["median_ms"]
    out, impossible = [], []
    for c in passed:
        s = summary.get(c["id"])
        if s is None:
            continue
        if s["impossible"]:
            impossible.append(c)
            continue
        out.append({"id": c["id"], "round": round_no, "median_ms": s["median_ms"], "spread": s["spread"],
                    "roofline_fraction": s["roofline_fraction"], "speedup": base / s["median_ms"], "baseline_ms": base,
                    "vs_best": prev["median_ms"] / s["median_ms"], "family": c["family"]})
    out.append({"id": f"round{round_no}:initial", "round": round_no, "median_ms": base,
                "spread": summary["initial"]["spread"], "roofline_fraction": summary["initial"]["roofline_fraction"],
                "speedup": 1.0, "baseline_ms": base, "family": "initial"})
    return out, impossible


def pick(result: dict, summary: dict, measured: list[dict], passed_ids: set[str], prev_id: str
         ) -> tuple[dict | None, str | None]:
    """The fastest passed candidate and why it beats the previous best (None when it does not)."""
    winner = min((m for m in measured if m["id"] in passed_ids), key=lambda m: m["median_ms"], default=None)
    why = beats(result, summary, winner["id"], prev_id if prev_id in summary else "initial") if winner else None
    return winner, why
