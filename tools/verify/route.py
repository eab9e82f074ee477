"""Routing: where the optimization goes after a verified round, from the verifier's evidence alone.
The answer names outcomes, not graph nodes (the agent maps them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Outcome = Literal["stop", "same_tier", "next_tier", "extra_round"]


class RoundFacts(BaseModel):
    pending: bool                     # the round had candidates
    passed: bool                      # at least one passed verification
    can_time: bool
    gain: float | None                # best / previous best, when measured
    roofline_fraction: float | None   # of the best kernel
    rounds: int                       # rewrite rounds done
    rounds_at_tier: int
    device_seconds: float
    has_next_tier: bool
    feedback_pending: bool = False    # a person asked for a new rewrite round (agents/approval.py)


class Limits(BaseModel):
    target_fraction: float
    max_rounds: int
    gpu_budget_s: float
    min_gain: float
    max_rounds_per_tier: int


def escalation_why(pending: bool, passed: bool, can_time: bool, gain: float | None, min_gain: float,
                   rounds_per_tier: int) -> str:
    """Why the verifier leaves a tier for the next one (goes into the decision trail)."""
    if not pending:
        return "no candidate this round"
    if not passed:
        return "no candidate passed verification"
    if not can_time or gain is None:
        return "speed not measured on this backend"
    if gain < min_gain:
        return f"best gain this round {gain:.2f}x < {min_gain}x"
    return f"round gained {gain:.2f}x, but the {rounds_per_tier} round(s) allowed at this tier are used"


def decide(f: RoundFacts, lim: Limits) -> tuple[Outcome, str]:
    """Stop (target met, budget spent, nothing left), rewrite again at the same tier (the round
    gained enough), escalate (it did not), or one extra round with all evidence when no tier is left."""
    if f.roofline_fraction and f.roofline_fraction >= lim.target_fraction:
        return "stop", f"target met: best at {f.roofline_fraction:.0%} of roofline"
    if f.rounds >= lim.max_rounds:
        return "stop", f"budget: {f.rounds} rewrite rounds done"
    if f.device_seconds >= lim.gpu_budget_s:
        return "stop", f"budget: {f.device_seconds:.0f} device seconds spent"
    if f.feedback_pending:
        return "same_tier", "a person asked for a new rewrite round with feedback"
    if f.gain is not None and f.gain >= lim.min_gain and f.rounds_at_tier < lim.max_rounds_per_tier:
        return "same_tier", f"round gained {f.gain:.2f}x: rewrite again with the same evidence"
    if f.has_next_tier:
        return "next_tier", escalation_why(f.pending, f.passed, f.can_time, f.gain, lim.min_gain,
                                           lim.max_rounds_per_tier)
    if f.pending and f.rounds_at_tier < lim.max_rounds_per_tier and f.can_time and (f.gain is None or f.gain > 1.0):
        return "extra_round", "no tier left; one more round with all evidence"
    if f.pending and not f.can_time:
        # the extra round answers measurements that showed the tiers' rewrites fell short; without a
        # timing backend there are none, and its variants could not be told apart either
        return "stop", "no tier left (no extra round: this backend measures no speed)"
    return "stop", "no tier left"
