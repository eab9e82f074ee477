"""The adversarial suite through warm runners: a round's candidates in one judge job, each runner
forked by one zygote, one after the other. Every cheat is rejected with the same class as through
a cold runner (tests/cpu/verifier/test_cheats.py), and an honest candidate right after the cheats
(caches, module state, threads, hooks) still passes: nothing of one candidate reaches the next."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import structlog

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.verification import verify_round

HERE = Path(__file__).resolve().parents[1] / "verifier"
_spec = importlib.util.spec_from_file_location("cheat_cases", HERE / "test_cheats.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = cases  # dataclasses look their module up
_spec.loader.exec_module(cases)


def test_cheats_rejected_and_honest_passes_through_one_warm_runner():
    dynamic = [c for c in cases.CHEATS + cases.WRONG if not c.static and c.task == cases.AXPY]
    honest = cases.HERE / "controls" / "axpy_block1024.py"
    order = [("honest_first", honest, None)] + [(c.candidate.stem, c.candidate, c) for c in dynamic] \
        + [("honest_last", honest, None)]
    cands = [{"id": cid, "path": str(p)} for cid, p, _ in order]
    with structlog.testing.capture_logs() as logs:
        verdicts = verify_round(str(cases.AXPY), cands, get_backend("interpreter"), cases.ALLOWED_OPS, 300, 1,
                                static_policy=False)
    runners = [e.get("runners") for e in logs if e.get("event") == "verify_round"]
    assert runners and runners[0].startswith("warm"), runners
    by_id = {v.candidate_id: v for v in verdicts}
    for cid, _, case in order:
        v = by_id[cid]
        if case is None:
            assert v.passed and v.checks > cases.CHECKS, f"{cid}: {v.klass} {v.reason}"  # listed + derived cases
            continue
        assert not v.passed and v.klass == case.expect, f"{cid}: {v.klass} ({v.reason}), want {case.expect}"
        for part in case.reason:
            assert part in v.reason, f"{cid}: reason {v.reason!r} lacks {part!r}"
