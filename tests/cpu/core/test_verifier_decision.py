"""The verifier's rule for "measurably faster" (agents.verifier.beats), on round medians measured on
the H200 (l2_foreach_add, bench_round1.json of the 2026-11-30 suite run) and on made-up noisy ones."""

from __future__ import annotations

from tritondx.agents.verifier import _summarize_bench, beats


def _result(rounds: dict[str, list[float]], spreads: dict[str, float] | None = None) -> dict:
    import statistics
    variants = {}
    for vid, meds in rounds.items():
        med = statistics.median(meds)
        variants[vid] = {"median_ms": med, "round_medians_ms": meds, "roofline_fraction": 0.5,
                         "spread": (spreads or {}).get(vid, (max(meds) - min(meds)) / med)}
    return {"shapes": [{"shape": [4194304], "dtype": "float32", "variants": variants, "errors": {}}]}


def _beats(rounds, cand, prev="initial"):
    r = _result(rounds)
    return beats(r, _summarize_bench(r, list(rounds)), cand, prev)


H200_FOREACH = {  # ms per round, interleaved: the initial's 8 launches waited on a loaded host
    "initial": [0.19926, 0.16822, 0.10938],
    "r1c1": [0.08838, 0.08698, 0.08701],   # one multi-tensor launch
    "r1c2": [0.20866, 0.11202, 0.11070],   # a bigger BLOCK, still 8 launches
}


def test_faster_in_every_round_wins_despite_a_large_spread():
    why = _beats(H200_FOREACH, "r1c1")
    assert why and why.startswith("1.93x") and "each of 3 interleaved rounds" in why, why


def test_slower_in_one_round_does_not_win_on_the_pairing():
    # r1c2 was slower than the initial in round 1 (208.7 vs 199.3 us): no paired win, and its
    # median (112.0 vs 168.2 us) is within the 53%/87% spreads
    assert _beats(H200_FOREACH, "r1c2") is None


def test_a_clear_win_beyond_the_spread_still_wins():
    why = _beats({"initial": [1.0, 1.01, 0.99], "c": [0.5, 0.51, 0.5]}, "c")
    assert why and "beyond the spread" in why


def test_equal_kernels_with_noise_do_not_win():
    assert _beats({"initial": [1.0, 1.2, 0.9], "c": [0.99, 1.25, 0.89]}, "c") is None
    assert _beats({"initial": [1.0, 1.0, 1.0], "c": [0.99, 0.99, 0.99]}, "c") is None  # 1% < MIN_GAIN


def test_two_rounds_are_too_few_to_pair():
    assert _beats({"initial": [1.0, 0.7], "c": [0.6, 0.65]}, "c") is None


def test_escalation_reason_matches_the_gain():
    """H200 l2_softmax, 2026-11-30: the trail said "best gain this round 1.11x < 1.05x" when a round
    that gained 1.11x had used up its tier's rounds."""
    from tritondx.agents.verifier import escalation_why
    assert escalation_why(True, True, True, 1.11, 1.05, 2) == \
        "round gained 1.11x, but the 2 round(s) allowed at this tier are used"
    assert escalation_why(True, True, True, 1.0, 1.05, 2) == "best gain this round 1.00x < 1.05x"
    assert escalation_why(True, False, True, None, 1.05, 2) == "no candidate passed verification"
    assert escalation_why(False, False, True, None, 1.05, 2) == "no candidate this round"
    assert escalation_why(True, True, False, None, 1.05, 2) == "speed not measured on this backend"


def test_extra_round_only_where_speed_is_measured():
    """The extra round with all evidence answers measurements that showed the tiers fell short: a backend
    that measures no speed ends when no tier is left, and says why."""
    from tritondx.tools.verify.route import Limits, RoundFacts, decide
    lim = Limits(target_fraction=0.8, max_rounds=6, gpu_budget_s=1e9, min_gain=1.05, max_rounds_per_tier=2)
    facts = dict(pending=True, passed=True, gain=None, roofline_fraction=None, rounds=3, rounds_at_tier=1,
                 device_seconds=0.0, has_next_tier=False)
    assert decide(RoundFacts(can_time=True, **facts), lim)[0] == "extra_round"
    outcome, why = decide(RoundFacts(can_time=False, **facts), lim)
    assert outcome == "stop" and "measures no speed" in why
