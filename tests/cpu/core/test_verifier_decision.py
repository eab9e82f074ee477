"""The verify loop's rule for "measurably faster" (tools/verify/select.beats), on round medians measured on
the H200 (l2_foreach_add, bench_round1.json of the 2026-11-30 suite run) and on made-up noisy ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritondx.tools.verify.interface import JudgeVerifier
from tritondx.tools.verify.select import beats, summarize_bench as _summarize_bench


def judge_is(monkeypatch, fn):
    """The judge's answers for these tests (the verifier node and the bench's full checks both ask it)."""
    monkeypatch.setattr(JudgeVerifier, "verify", lambda self, *a, **k: fn(*a, **k))

#: where a round stops: the nodes after the verify loop (verifier -> [bench ->] select)
AFTER_ROUND = ["rewriter", "tuner", "profiler", "ir_analyst", "compiler_expert", "report", "final_approval"]


def run_round(state: dict) -> dict:
    """The round's part of the real graph (verifier, bench where it applies, select) on ``state``, as the rewriter
    left it, with the run's settings ``state["config"]`` as runtime context: the state it ends with, and where it
    would go next (``"next"``)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command
    from tritondx.config import RunConfig, RunContext
    from tritondx.graph import builder
    state = dict(state)
    context = RunContext(config=RunConfig(**state.pop("config", {})))
    graph = builder.compile(checkpointer=InMemorySaver(), interrupt_before=AFTER_ROUND)
    config = {"configurable": {"thread_id": "t"}}
    graph.update_state(config, Command(goto="verifier", update=state), as_node="rewriter")
    graph.invoke(None, config, context=context)
    snap = graph.get_state(config)
    return {**snap.values, "next": list(snap.next)}


def on_cuda(monkeypatch) -> None:
    """The round's nodes on the CUDA backend, on this CPU."""
    from tritondx.agents import bench, select, verifier
    from tritondx.tools.backends.cuda.backend import CudaBackend
    for module in (verifier, bench, select):
        monkeypatch.setattr(module, "backend_of", lambda s, c: CudaBackend())


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
    from tritondx.tools.verify.route import escalation_why
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


def test_a_hardware_check_that_cannot_measure_the_initial_kernel_keeps_the_winner(tmp_path, monkeypatch):
    """The round's winner on CUDA goes through ncu (separate processes). A check that measures both and
    does not confirm the claim rejects it; one that could not measure the *initial* kernel (ncu failing on
    the task's own code: seen on the H200) says nothing about the claim, so the winner stays best and the
    report says the speedup is not hardware-confirmed (was: every winner rejected, so no speedup at all)."""
    from tritondx.agents import bench as B, verifier as V
    from tritondx.tools.report.writer import _hardware_md
    from tritondx.tools.records.verify import HardwareCheck, Verdict
    from tritondx.tools.verify.timing import HW_UNAVAILABLE, TimedRound
    task = tmp_path / "task.py"
    task.write_text((Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py").read_text())
    cand = {"id": "r1c1", "family": "launch_config", "motivated_by": [], "path": str(task)}
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "cuda", "target": "cuda:90",
             "config": {"backend": "cuda", "max_rounds": 1, "final_profile": False}, "tiers_done": ["triage"],
             "findings": [], "candidates": [cand], "pending": ["r1c1"], "round": 1, "rounds_at_tier": 1,
             "best": {"id": "initial", "path": str(task)}, "family_attempts": []}
    on_cuda(monkeypatch)
    judge_is(monkeypatch, lambda *a, **k: [Verdict(candidate_id="r1c1", passed=True, backend="cuda")])
    monkeypatch.setattr(B, "time_round", lambda *a, **k: TimedRound(result={"shapes": []}, survivors=["r1c1"],
                                                                    variants=[{"id": "initial"}, {"id": "r1c1"}]))
    monkeypatch.setattr(B, "summarize_bench", lambda r, ids: {"initial": {"median_ms": 2.0, "roofline_fraction": .3},
                                                              "r1c1": {"median_ms": 1.0, "roofline_fraction": .6}})
    monkeypatch.setattr(B, "measurements", lambda *a: ([], []))
    monkeypatch.setattr(B, "pick", lambda *a: ({"id": "r1c1", "median_ms": 1.0, "speedup": 2.0,
                                               "roofline_fraction": 0.6, "family": "launch_config"}, "faster"))
    outcomes = {}
    for label, note in (("unavailable", f"{HW_UNAVAILABLE}: initial under ncu: the candidate's process ended"),
                        ("disagrees", "ncu: 2.0 us -> 1.9 us per call (1.05x) vs claimed 2.00x")):
        monkeypatch.setattr(B, "hardware_check", lambda *a, _n=note, **k: HardwareCheck(claimed=2.0, note=_n))
        outcomes[label] = run_round(dict(state))
    kept = outcomes["unavailable"]["best"]
    assert kept["id"] == "r1c1" and kept["hardware"]["confirmed"] is False
    assert "NOT confirmed" in _hardware_md(kept)[0] and HW_UNAVAILABLE in _hardware_md(kept)[0]
    assert outcomes["disagrees"]["best"]["id"] == "initial"
    assert any(v.get("klass") == "hardware_unconfirmed" for v in outcomes["disagrees"]["verifications"])
    # the report reads which check rejected it (Verification.check), not an id suffix; the settings stayed out of the
    # state (runtime context)
    from tritondx.tools.report.writer import build_report
    cand.update(round=1, tier="triage", params=None, description="d", prediction="", parent="initial")
    report = build_report(tmp_path, {**outcomes["disagrees"], "candidates": [cand]}, 1.0)
    assert report["candidates"][0]["rejection"] == "hardware_unconfirmed"
    assert "config" not in outcomes["disagrees"] and "config" not in outcomes["unavailable"]


def test_on_a_timing_backend_only_the_would_be_winners_get_the_full_checks(tmp_path, monkeypatch):
    """Staged verification (tools/verify/staged.py): every candidate is screened on the listed shapes and
    timed; only those that beat the best get the full checks, fastest first. The fastest one failing them
    is rejected with its class and the next one wins; the one that was not faster is never called verified
    (the report says "listed shapes only")."""
    from tritondx.agents import bench as B, verifier as V
    from tritondx.tools.report.writer import build_report
    from tritondx.tools.records.verify import Verdict
    from tritondx.tools.verify import staged
    from tritondx.tools.verify.timing import TimedRound
    task = tmp_path / "task.py"
    task.write_text((Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py").read_text())
    ids = ["r1c1", "r1c2", "r1c3"]
    cands = [{"id": i, "round": 1, "tier": "triage", "family": "launch_config", "params": 1, "description": i,
              "motivated_by": [n], "prediction": "", "path": str(task), "parent": "initial"}
             for n, i in enumerate(ids)]
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "cuda", "target": "cuda:90",
             "config": {"backend": "cuda", "max_rounds": 1, "final_profile": False, "ncu": False},
             "tiers_done": ["triage"], "findings": [], "candidates": cands, "pending": ids, "round": 1,
             "rounds_at_tier": 1, "best": {"id": "initial", "path": str(task)}, "family_attempts": []}
    calls = []

    def fake_verify(task_path, cs, backend, ops, timeout, parallel, scope="full"):
        calls.append((scope, [c["id"] for c in cs]))
        return [Verdict(candidate_id=c["id"], backend="cuda", scope=scope,
                        passed=not (scope == "full" and c["id"] == "r1c1"),
                        klass="mismatch" if scope == "full" and c["id"] == "r1c1" else None) for c in cs]

    result = _result({"initial": [1.0, 1.0, 1.0], "r1c1": [0.5, 0.5, 0.5], "r1c2": [0.6, 0.6, 0.6],
                      "r1c3": [1.0, 1.01, 0.99]})
    on_cuda(monkeypatch)
    judge_is(monkeypatch, fake_verify)
    monkeypatch.setattr(B, "time_round", lambda *a, **k: TimedRound(
        result=result, survivors=ids, variants=[{"id": v} for v in ["initial", *ids]]))
    upd = run_round(dict(state))
    assert calls == [("screen", ids), ("full", ["r1c1"]), ("full", ["r1c2"])]   # fastest first, until one passes
    assert upd["best"]["id"] == "r1c2"
    by = {v["id"]: v for v in upd["verifications"]}
    assert by["r1c1"]["klass"] == "mismatch" and by["r1c2"]["scope"] == "full" and by["r1c3"]["scope"] == "screen"
    report = build_report(tmp_path, upd, 1.0)
    verified = {c["id"]: (c["verified"], c["screened"]) for c in report["candidates"]}
    assert verified == {"r1c1": (False, False), "r1c2": (True, False), "r1c3": (None, True)}
    # with the screen off, one judge job checks every candidate in full
    calls.clear()
    run_round({**state, "config": {**state["config"], "verify_screen": False}})
    assert calls == [("full", ids)]


def test_the_fastest_contenders_hardware_check_starts_beside_its_full_checks(tmp_path, monkeypatch, hw_pools):
    """On CUDA with ncu the fastest contender's hardware measurement (after the initial kernel's half) starts
    when its full checks start, not after them; the winner's check uses it. When that contender fails its full
    checks and the next one wins, the next one is measured after its own checks, and the early one is unused."""
    import threading

    from tritondx.agents import bench as B, verifier as V
    from tritondx.tools.exec.sandbox import JobResult
    from tritondx.tools.verify import staged, timing
    from tritondx.tools.records.verify import Verdict
    from tritondx.tools.verify.timing import TimedRound
    task = tmp_path / "task.py"
    task.write_text((Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py").read_text())
    ids = ["r1c1", "r1c2"]
    cands = [{"id": i, "round": 1, "tier": "triage", "family": "launch_config", "params": 1, "description": i,
              "motivated_by": [n], "prediction": "", "path": str(tmp_path / f"{i}.py"), "parent": "initial"}
             for n, i in enumerate(ids)]
    for c in cands:
        Path(c["path"]).write_text(task.read_text())
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "cuda", "target": "cuda:90",
             "config": {"backend": "cuda", "max_rounds": 1, "final_profile": False, "ncu": True},
             "tiers_done": ["triage"], "findings": [], "candidates": cands, "pending": ids, "round": 1,
             "rounds_at_tier": 1, "best": {"id": "initial", "path": str(task)}, "family_attempts": []}
    events: list[str] = []
    lock = threading.Lock()

    def fake_job(job, backend, timeout, **kw):
        what = Path(job.get("candidate", "initial")).stem
        with lock:
            events.append(f"hwcheck {what}")
        out = {"ok": True, "shape": [4096]}
        if "initial" in job["measure"]:
            out["initial"] = {"ns_per_call": 2000.0, "kernels": ["k"], "launches": 5}
        if "best" in job["measure"]:
            out["best"] = {"ns_per_call": 1000.0, "kernels": ["k"], "launches": 5}
        return JobResult(kind="ok", returncode=0, seconds=1.0, result=out), 1.0, 0.5

    def run(fails_full: set[str]):
        events.clear()
        gate = threading.Event()   # the full checks end only once the early measurement has been asked for

        def fake_verify(task_path, cs, backend, ops, timeout, parallel, scope="full"):
            if scope == "full":
                assert gate.wait(10), "the full checks ran before the early hardware check started"
                with lock:
                    events.append(f"full {cs[0]['id']}")
            return [Verdict(candidate_id=c["id"], backend="cuda", scope=scope,
                            passed=not (scope == "full" and c["id"] in fails_full),
                            klass="mismatch" if scope == "full" and c["id"] in fails_full else None) for c in cs]

        def job(job, backend, timeout, **kw):
            if job.get("candidate"):
                gate.set()
            return fake_job(job, backend, timeout, **kw)

        monkeypatch.setattr(timing, "run_device_job", job)
        monkeypatch.setattr(timing, "_initial", {})
        judge_is(monkeypatch, fake_verify)
        result = _result({"initial": [1.0, 1.0, 1.0], "r1c1": [0.5, 0.5, 0.5], "r1c2": [0.6, 0.6, 0.6]})
        monkeypatch.setattr(B, "time_round", lambda *a, **k: TimedRound(
            result=result, survivors=ids, variants=[{"id": v} for v in ["initial", *ids]]))
        if fails_full:
            gate.set()   # the second contender's checks need no early measurement
        return run_round(dict(state))

    on_cuda(monkeypatch)
    upd = run(set())
    assert upd["best"]["id"] == "r1c1" and upd["best"]["hardware"]["confirmed"] is True
    assert events == ["hwcheck initial", "hwcheck r1c1", "full r1c1"]   # measured once, before its checks ended
    early: list = []
    monkeypatch.setattr(B, "early_hardware", lambda *a, _f=B.early_hardware, **k: early.append(_f(*a, **k)) or early[-1])
    upd = run({"r1c1"})
    assert upd["best"]["id"] == "r1c2" and upd["best"]["hardware"]["confirmed"] is True
    assert events.index("full r1c2") < events.index("hwcheck r1c2")
    # the early one (r1c1's), unused: discarded (timing.discard_early) once r1c2 won; measured if its ncu session of
    # the best had started by then, else cancelled or stopped before it
    assert len(early) == 1
    ran = not early[0].cancelled() and early[0].result()["ok"]
    assert ran or early[0].cancelled() or early[0].result()["note"] == timing.NOT_NEEDED
    assert events.count("hwcheck r1c1") == int(ran) and events.count("hwcheck r1c2") == 1


def _two_shapes(first: dict[str, float], second: dict[str, float]) -> dict:
    """A bench result over two cases: the first bench shape, then a larger one (median ms per variant)."""
    def entry(shape, meds):
        return {"shape": shape, "dtype": "torch.float16", "errors": {}, "variants": {
            v: {"median_ms": m, "round_medians_ms": [m] * 3, "roofline_fraction": 0.5, "spread": 0.01}
            for v, m in meds.items()}}
    return {"shapes": [entry([65536, 1024], first), entry([8192, 50257], second)]}


def test_the_claim_is_checked_at_the_case_of_its_largest_gain():
    """``claim_case``: no gain on the first bench shape and 1.4x on the second (l2_softmax's fused candidate on the
    H200, 2026-12-03: geomean 1.32x claimed, ncu measured 1.01x on the first shape, and a real gain was rejected).
    The hardware checks the second case against 1.4x; a best gain on the first case needs no case (the default)."""
    from tritondx.tools.verify.timing import claim_case
    r = _two_shapes({"initial": 0.1308, "c": 0.1307}, {"initial": 2.8466, "c": 2.0273})
    case, claimed = claim_case(r, "c")
    assert case == {"shape": [8192, 50257], "dtype": "torch.float16"} and claimed == pytest.approx(1.404, abs=1e-3)
    case, claimed = claim_case(_two_shapes({"initial": 2.0, "c": 1.0}, {"initial": 2.0, "c": 1.5}), "c")
    assert case is None and claimed == 2.0
    assert claim_case(r, "absent") == (None, None)


def test_the_winners_hardware_check_runs_at_that_case_and_confirms_a_gain_the_first_shape_lacks(tmp_path,
                                                                                                monkeypatch, hw_pools):
    """The verifier hands the case to both halves of the check (the hwcheck jobs get its shape and dtype) and judges
    ncu's ratio against the claim there: 1.4x claimed, 1.38x measured, confirmed. Measured at the first shape
    against the geomean, this honest gain was rejected."""
    from tritondx.agents import bench as B, verifier as V
    from tritondx.tools.exec.sandbox import JobResult
    from tritondx.tools.verify import staged, timing
    from tritondx.tools.records.verify import Verdict
    from tritondx.tools.verify.timing import TimedRound
    task = tmp_path / "task.py"
    task.write_text((Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py").read_text())
    cand = {"id": "r1c1", "round": 1, "tier": "triage", "family": "fuse_passes", "params": 1, "description": "f",
            "motivated_by": [0], "prediction": "", "path": str(tmp_path / "r1c1.py"), "parent": "initial"}
    Path(cand["path"]).write_text(task.read_text())
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "cuda", "target": "cuda:90",
             "config": {"backend": "cuda", "max_rounds": 1, "final_profile": False, "ncu": True},
             "tiers_done": ["triage"], "findings": [], "candidates": [cand], "pending": ["r1c1"], "round": 1,
             "rounds_at_tier": 1, "best": {"id": "initial", "path": str(task)}, "family_attempts": []}
    jobs: list[dict] = []

    def job(job, backend, timeout, **kw):
        jobs.append(job)
        at_second = job.get("shape") == [8192, 50257]
        out = {"ok": True, "shape": job.get("shape", [65536, 1024]), "dtype": job.get("dtype", "torch.float16")}
        if "initial" in job["measure"]:
            out["initial"] = {"ns_per_call": 2846000.0 if at_second else 125500.0, "kernels": ["k"], "launches": 1}
        if "best" in job["measure"]:
            out["best"] = {"ns_per_call": 2062000.0 if at_second else 124500.0, "kernels": ["k"], "launches": 1}
        return JobResult(kind="ok", returncode=0, seconds=1.0, result=out), 1.0, 0.5

    def fake_verify(task_path, cs, backend, ops, timeout, parallel, scope="full"):
        return [Verdict(candidate_id=c["id"], backend="cuda", scope=scope, passed=True) for c in cs]

    monkeypatch.setattr(timing, "run_device_job", job)
    monkeypatch.setattr(timing, "_initial", {})
    judge_is(monkeypatch, fake_verify)
    on_cuda(monkeypatch)
    result = _two_shapes({"initial": 0.1308, "r1c1": 0.1307}, {"initial": 2.8466, "r1c1": 2.0273})
    monkeypatch.setattr(B, "time_round", lambda *a, **k: TimedRound(
        result=result, survivors=["r1c1"], variants=[{"id": v} for v in ["initial", "r1c1"]]))
    upd = run_round(dict(state))
    hw = upd["best"]["hardware"]
    assert upd["best"]["id"] == "r1c1" and hw["confirmed"] is True, hw
    assert hw["claimed"] == pytest.approx(1.404, abs=1e-3) and hw["shape"] == [8192, 50257]
    assert "[8192, 50257]" in hw["note"]
    assert jobs and all(j.get("shape") == [8192, 50257] and j.get("dtype") == "torch.float16" for j in jobs), jobs


def test_a_discarded_early_measurements_device_seconds_go_to_its_own_run_once(tmp_path):
    """An early hardware measurement that ran although no check used it (``timing.discard_early`` could not cancel it)
    still cost device seconds: they go to the run that started it, once, and not to another run of the same task."""
    from concurrent.futures import Future

    from tritondx.tools.verify import timing
    run_a, run_b = tmp_path / "run_a", tmp_path / "run_b"
    done = Future()
    done.set_result({"ok": True, "device_seconds": 2.5})   # already ended: cannot be cancelled
    timing.discard_early(run_a, done)
    assert timing.unused_device_seconds(run_b) == 0.0
    assert timing.unused_device_seconds(run_a) == 2.5
    assert timing.unused_device_seconds(run_a) == 0.0
