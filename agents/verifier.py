"""Verifier node: the round's pending candidates through the judge (``tools/verify/verification.py``, behind
``tools/verify/interface.py``'s ``Verifier``): every
listed shape, fresh inputs, integrity checks, each candidate in its own runner. On a timing backend with
``verify_screen`` this is the screen (the listed shapes); the would-be winners get the full checks in the bench
node. A tuned structural candidate that fails is checked again as written (``candidates.fallback``). Next: ``bench``
when something passed on a backend that times kernels, else ``select``."""

from __future__ import annotations

from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from tritondx.agents.common import backend_of, logger, run_config, run_dir
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Verification
from tritondx.tools.records.verify import Verdict
from tritondx.tools.run.phases import Phases, entries
from tritondx.tools.tune.candidates import fallback
from tritondx.tools.verify.staged import screen_note
from tritondx.tools.verify.timing import unused_device_seconds
from tritondx.tools.verify.interface import verifier_named


def judged(candidate_id: str, v: Verdict) -> dict:
    """The judge's verdict as the state keeps it (its check records stay in the judge's artifacts)."""
    return Verification.of(candidate_id, "judge", v.passed, v.klass, v.reason, v.backend,
                           **v.model_dump(exclude={"records", "candidate_id", "passed", "klass", "reason", "backend"}))


def verifier_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                  ) -> Command[Literal["bench", "select"]]:
    log = logger("verifier", config)
    cfg = run_config(runtime)
    backend = backend_of(state, cfg)
    cands = {c["id"]: c for c in state.get("candidates", [])}
    pending = [cands[i] for i in state.get("pending", []) if i in cands]
    ph = Phases()
    screen = backend.can_time and cfg.verify_screen   # listed shapes first, full checks for would-be winners
    checker = verifier_named(cfg.verifier)   # the judge (a no-op one in tests of what surrounds it)

    def verify(cands: list[dict]) -> list[Verdict]:
        with ph.time("verify"):
            return checker.verify(state["task_path"], cands, backend, state.get("probe", {}).get("ops", []),
                                  cfg.verify_timeout_s, cfg.verify_parallel, scope="screen" if screen else "full")
    verdicts = verify(pending)
    # with the device seconds of early hardware measurements an earlier round discarded, ended since
    jobs, held = 0.0, unused_device_seconds(run_dir(state))
    # a person approved the tuned source (--interactive): nothing else runs in its place
    failed_tuned = [i for i, (c, v) in enumerate(zip(pending, verdicts))
                    if not v.passed and c.get("as_written") and not cfg.interactive]
    reverted = [fallback(pending[i], verdicts[i].klass or "rejected") for i in failed_tuned]
    for i, c, v in zip(failed_tuned, reverted, verify(reverted) if reverted else []):
        log.info("verified_as_written", candidate=c["id"], tuned_failed=verdicts[i].klass, passed=v.passed)
        if backend.can_time:
            jobs, held = jobs + verdicts[i].seconds, held + verdicts[i].device_s
        pending[i], verdicts[i] = c, v
    verifications, passed = [], []
    for c, v in zip(pending, verdicts):
        if backend.can_time:
            jobs, held = jobs + v.seconds, held + v.device_s
        verifications.append(screen_note(judged(c["id"], v)))
        log.info("verified", candidate=c["id"], family=c["family"], passed=v.passed, klass=v.klass,
                 reason=v.reason[:200], scope=v.scope)
        if v.passed:
            passed.append(c["id"])
    insufficient = [fid for c in pending if c["id"] not in passed for fid in c["motivated_by"]]
    update = {"candidates": reverted} if reverted else {}
    return Command(goto="bench" if passed and backend.can_time else "select", update={**update,
        "verifications": verifications, "insufficient": insufficient, "pending": [],
        "round_result": {"checked": [c["id"] for c in pending], "passed": passed, "gain": None},
        "cost": entries(ph.seconds, jobs, held)})
