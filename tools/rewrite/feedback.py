"""What the offline expert can take from a person's free-text feedback: the rewrite families it names.

The expert cannot read prose; it can honour a note that names catalog families: a family named after a
negation in the same clause is avoided for the next round, any other family named is tried first
(still only where a finding motivates it). A note that names no family maps to nothing, and the
rewriter says so instead of claiming it used the note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel

# Clause boundaries in a note, e.g. "no launch_config; try autotune, and keep BLOCK a power of two"
CLAUSE_RE = re.compile(r"[.;,!?\n]|\bbut\b|\band\b")
# A negation before a family name in its clause, e.g. "don't use launch config", "avoid autotune"
NEGATION_RE = re.compile(r"\b(no|not|avoid|skip|without|never|don'?t|do not|stop|drop|instead of)\b", re.I)


class FeedbackPlan(BaseModel):
    avoid: list[str] = []     # family ids the next round must not propose
    prefer: list[str] = []    # family ids to try first

    @property
    def empty(self) -> bool:
        return not self.avoid and not self.prefer


def _spellings(family: str) -> re.Pattern:
    # "launch_config" also as "launch config" or "launch-config"
    words = [re.escape(w) for w in family.split("_")]
    return re.compile(r"\b" + r"[\s_-]?".join(words) + r"\b", re.I)


def read_feedback(text: str | None, families: Iterable[str]) -> FeedbackPlan:
    """The families a note names, split into avoided and preferred."""
    avoid: list[str] = []
    prefer: list[str] = []
    for clause in CLAUSE_RE.split(text or ""):
        for fam in sorted(families):
            m = _spellings(fam).search(clause)
            if not m:
                continue
            target = avoid if NEGATION_RE.search(clause[: m.start()]) else prefer
            if fam not in avoid and fam not in prefer:
                target.append(fam)
    return FeedbackPlan(avoid=avoid, prefer=prefer)
