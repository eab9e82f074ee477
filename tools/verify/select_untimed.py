"""Which kernel is the result when speed cannot be measured (the interpreter on CPU).

On a timing backend the verifier keeps a candidate only when it is faster than the current best
beyond the measured spread (agents/verifier.py). Without timing nothing can be called faster, so:

- by default the result stays the **initial kernel**; the verified candidates are listed in the report
  as awaiting timing on a GPU, and every later tier reads its evidence from the initial kernel (IR
  evidence then quotes the original, not a kernel the tool wrote);
- with a person in the loop (``--interactive``) the first verified candidate in catalog priority order
  (structural rewrites before configuration search) is offered at the final approval: the person decides;
- with ``--accept-unmeasured`` that candidate is taken as the result, and the report says it is unmeasured;
  each later round's candidates are written on top of it (the rewriter builds on the current best), so the
  first verified one of a later round replaces it: two verified improvements combine, each checked against
  the task's reference, none of them timed (the rule says what it was built on).

With a person in the loop nothing is stacked: the first pick is offered at the final approval, and a later
round's candidates do not replace it.
"""

from __future__ import annotations

from typing import Any


def unmeasured_choice(passed: list[dict[str, Any]], current: dict[str, Any], interactive: bool,
                      accept_unmeasured: bool) -> dict[str, Any]:
    """The ``best`` record after a round whose ``passed`` candidates (catalog priority order) could not be
    timed; ``current`` is the best record so far."""
    ids = [c["id"] for c in passed]
    first = current.get("id") in (None, "initial")
    # --accept-unmeasured: a later round's candidates were written on the unmeasured pick; the first verified
    # one carries both changes
    stack = accept_unmeasured and not interactive and not first and current.get("measured") is False
    if passed and ((interactive or accept_unmeasured) and first or stack):
        c = passed[0]
        why = ("offered for a person to accept at the final approval" if interactive else
               "taken because --accept-unmeasured was given")
        built_on = [*current.get("built_on", []), current["id"]] if stack else []
        on = (f"; built on {' <- '.join(reversed(built_on))} (verified, unmeasured too), so it carries their "
              "changes" if built_on else "")
        return {"id": c["id"], "path": c["path"], "median_ms": None, "speedup": None, "family": c["family"],
                "measured": False, "built_on": built_on,
                "rule": f"speed not measured; candidate {c['id']} ({c['family']}) is the first verified candidate "
                        f"in catalog priority order (structural rewrites before configuration search), {why}{on}"}
    best = dict(current)
    best["measured"] = False
    if best.get("id") in (None, "initial"):
        waiting = sorted(set(best.get("awaiting_timing", [])) | set(ids))
        best["awaiting_timing"] = waiting
        best["rule"] = ("speed not measured: no candidate is claimed faster, so the result is the initial kernel"
                        + (f"; verified candidates awaiting timing on a GPU: {', '.join(waiting)}" if waiting else "")
                        + " (--accept-unmeasured takes the first verified one instead)")
    return best
