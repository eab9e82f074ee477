"""Staged verification on a backend that times: screen, time, then verify in full what would win.

Most candidates of a round lose: on the H200 corpus batch of 2026-12-01 a round of 13 launch-space
candidates spent 184 s in full verification (derived sizes, value stress, branch coverage: every
new specialization compiled) and none beat the initial kernel. So on a timing backend a round is:

1. **screen**: every candidate through the run-time checks on the listed shapes only (CHECK_SHAPES,
   and BENCH_SHAPES on a GPU: what is timed is also checked), ``cases.plan_checks(scope="screen")``;
2. **time**: the screened candidates in the round's one bench job (``timing.time_round``);
3. **confirm**: the candidates that measurably beat the best (``select.beats``), fastest first and at
   most ``top`` of them, through the full checks one at a time until one passes (on the H200 suite of
   2026-12-01 three at once took 126 s of a 225 s task). Only a fully verified candidate can be chosen
   (``select.pick`` gets their ids alone); one that fails is rejected with its class.

A screened candidate that was not faster keeps verdict scope ``screen``: the report says it was checked
on the listed shapes only, never that it was verified.
"""

from __future__ import annotations

from typing import Any

from tritondx.tools.backends.base import Backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.select import beats
from tritondx.tools.verify.interface import verifier_named


def contenders(result: dict, summary: dict, measured: list[dict], screened: set[str], prev_id: str,
               top: int) -> list[str]:
    """Ids of the screened candidates that measurably beat ``prev_id``, fastest first, at most ``top``."""
    prev = prev_id if prev_id in summary else "initial"
    ranked = sorted((m for m in measured if m["id"] in screened), key=lambda m: m["median_ms"])
    return [m["id"] for m in ranked if beats(result, summary, m["id"], prev)][:max(0, top)]


def confirm(task_path: str, ranked: list[dict], backend: Backend, allowed_ops: list[str], cfg: Any) -> list[Verdict]:
    """The full checks for ``ranked`` (fastest first), one judge job each, until one passes: the verdicts
    of those checked (the last one the winner when it passed). ``cfg``: the run's verifier, timeout and
    parallelism."""
    out: list[Verdict] = []
    checker = verifier_named(cfg.verifier)
    for c in ranked:
        (v,) = checker.verify(task_path, [c], backend, allowed_ops, cfg.verify_timeout_s, cfg.verify_parallel,
                              scope="full")
        out.append(v)
        if v.passed:
            break
    return out


def screen_note(entry: dict) -> dict:
    """A screened verification entry that got no full checks: what the report shows instead of "verified"."""
    if entry.get("passed") and entry.get("scope") == "screen":
        return {**entry, "reason": entry.get("reason") or "checked on the listed shapes only: not faster than the "
                                                            "best, so not verified in full"}
    return entry
