"""Orchestrator side of verification: the static policy, then the judge job; a verdict only counts
when the judge sealed it (``seal.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from tritondx.tools.backends.base import Backend
from tritondx.tools.verify.judge import seal
from tritondx.tools.verify import servers
from tritondx.tools.exec.gpulock import JOB_ALONE_ENV, held_seconds
from tritondx.tools.exec.sandbox import run_job
from tritondx.tools.exec.jobs import DEFAULT_MEMORY_BYTES, job_error, run_device_job
from tritondx.tools.verify.policy import check as policy_check
from tritondx.tools.records.verify import DECIDED, DECIDED_TAG, CheckRecord, Verdict

log = structlog.get_logger(__name__)


def verify_candidate(task_path: str, candidate_path: str, candidate_id: str, backend: Backend,
                     include_bench: bool = False, allowed_ops: list[str] | None = None, timeout: float = 600,
                     seed: int = 0, memory_bytes: int | None = None, static_policy: bool = True) -> Verdict:
    """Static policy, then the sandboxed judge job. ``memory_bytes``: the job's address-space limit;
    None takes the backend's default (``DEFAULT_MEMORY_BYTES``). ``seed`` is ignored (kept for
    callers): the judge draws its own seeds. ``static_policy=False`` skips the source policy (the
    adversarial suite uses it to test the run-time defenses alone)."""
    del seed
    cand_src = Path(candidate_path).read_text()
    orig_src = Path(task_path).read_text()
    bad = policy_check(cand_src, orig_src) if static_policy and candidate_path != task_path else None
    if bad:
        return Verdict(candidate_id=candidate_id, passed=False, klass=bad[0], reason=bad[1], backend=backend.name,
                       ran=[STATIC + DECIDED.format(klass=bad[0])], decided_by=STATIC)
    key = seal.new_key()
    job = {"kind": "verify", "task": str(Path(task_path).resolve()), "candidate": str(Path(candidate_path).resolve()),
           "device": backend.torch_device, "include_bench": include_bench, "allowed_ops": allowed_ops or []}
    if memory_bytes is None:
        memory_bytes = DEFAULT_MEMORY_BYTES.get(backend.name)
    r, seconds, device_s = run_device_job(job, backend, timeout, memory_bytes, extra_env={seal.SEAL_ENV: key},
                                          candidate=candidate_id)
    ran = ([STATIC] if static_policy else []) + judge_ran(r.result, key)
    verdict = _single_verdict(r, key, candidate_id, backend, seconds, device_s, ran)
    verdict.steps = judge_steps(r.result, key)
    return verdict


def _single_verdict(r, key: str, candidate_id: str, backend: Backend, seconds: float, device_s: float,
                    ran: list[str]) -> Verdict:
    if r.ok and r.result and r.result.get("passed") is True:
        if not seal.valid(key, r.result):
            return Verdict(candidate_id=candidate_id, passed=False, klass="verdict_forgery", backend=backend.name,
                           reason="the job's answer says passed but does not carry the judge's seal (a result "
                                  "written by candidate code?)", seconds=seconds, device_s=device_s, ran=ran)
        records = [CheckRecord(**c) for c in r.result.get("checks", [])]
        return Verdict(candidate_id=candidate_id, passed=True, backend=backend.name, checks=len(records),
                       records=records, ran=ran, coverage=list(r.result.get("coverage") or []), seconds=seconds,
                       device_s=device_s, speed_measured=False)
    klass, reason = job_error(r)
    ran = with_decision(ran, klass)
    return Verdict(candidate_id=candidate_id, passed=False, klass=klass, reason=reason[:600], backend=backend.name,
                   seconds=seconds, device_s=device_s, ran=ran, decided_by=decided_by(ran),
                   coverage=judge_coverage(r.result, key))


#: the first check, run here before any job
STATIC = "static policy"


def judge_ran(answer: dict | None, key: str) -> list[str]:
    """The checks the judge ran, in order (``Judge.trail``; on a rejection the deciding one marked): from a sealed
    answer only (an unsealed one, a runner's forgery, says nothing about what ran)."""
    if not isinstance(answer, dict) or not seal.valid(key, answer):
        return []
    return [str(x) for x in answer.get("ran") or [] if isinstance(x, str)]


def judge_coverage(answer: dict | None, key: str) -> list[str]:
    """The plan's summary a rejection carries (what was planned, per-dimension sizes included): sealed answers only."""
    if not isinstance(answer, dict) or not seal.valid(key, answer):
        return []
    return [str(x) for x in answer.get("coverage") or [] if isinstance(x, str)]


def with_decision(ran: list[str], klass: str) -> list[str]:
    """``ran`` with the deciding check marked: as the judge marked it, or, when no check of the judge's says so (the
    job died, timed out or sent nothing), the job itself."""
    if any(DECIDED_TAG in x for x in ran):
        return ran
    return ran + [f"judge job ({klass})" + DECIDED.format(klass=klass)]


def decided_by(ran: list[str]) -> str:
    return next((x.split(DECIDED_TAG)[0] for x in ran if DECIDED_TAG in x), "")


def judge_steps(answer: dict | None, key: str) -> dict[str, float]:
    """The judge's seconds per step of one candidate's checks (``judge.candidate.STEPS``): from a sealed answer
    only."""
    if not isinstance(answer, dict) or not seal.valid(key, answer):
        return {}
    steps = answer.get("steps")
    return {str(k): float(v) for k, v in steps.items() if isinstance(v, (int, float)) and not isinstance(v, bool)} \
        if isinstance(steps, dict) else {}


def _verdict_from(c: dict, r: dict | None, key: str, backend: Backend, seconds: float, ran_static: bool,
                  scope: str = "full") -> Verdict:
    """One candidate's verdict out of a round job's answer (``judge.job.verify_round``), for the ``scope``
    the orchestrator asked for (a sealed answer for another scope is not this verdict)."""
    ran = ([STATIC] if ran_static else []) + judge_ran(r, key)
    device_s = held_seconds((r or {}).get("device_usage"))
    if r and r.get("passed") is True:
        if not seal.valid(key, r):
            return Verdict(candidate_id=c["id"], passed=False, klass="verdict_forgery", backend=backend.name,
                           reason="the job's answer says passed but does not carry the judge's seal (a result "
                                  "written by candidate code?)", seconds=seconds, device_s=device_s, ran=ran)
        if (r.get("scope") or "full") != scope:
            return Verdict(candidate_id=c["id"], passed=False, klass="verdict_forgery", backend=backend.name,
                           reason=f"the judge's answer is for {r.get('scope')!r} checks, {scope!r} were asked for",
                           seconds=seconds, device_s=device_s, ran=ran)
        records = [CheckRecord(**x) for x in r.get("checks", [])]
        return Verdict(candidate_id=c["id"], passed=True, backend=backend.name, checks=len(records), records=records,
                       ran=ran, coverage=list(r.get("coverage") or []), seconds=seconds, device_s=device_s,
                       speed_measured=False, scope=scope)
    klass, reason = (r.get("class", "error"), r.get("error", "")) if r else ("no_result", "the judge sent no verdict")
    ran = with_decision(ran, klass)
    return Verdict(candidate_id=c["id"], passed=False, klass=klass, reason=str(reason)[:600], backend=backend.name,
                   seconds=seconds, device_s=device_s, ran=ran, decided_by=decided_by(ran),
                   coverage=judge_coverage(r, key))


def verify_round(task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str], timeout: float,
                 parallel: int, alone: bool = False, static_policy: bool = True, scope: str = "full") -> list[Verdict]:
    """The candidates that pass the static policy in ONE judge job (one original, one set of cases and
    inputs, warm runners); ``timeout`` is per candidate. A candidate that ran out of device memory
    beside other jobs of a batch is checked once more with the device alone (``run_device_job``).
    ``static_policy=False``: the run-time checks alone (the adversarial suite). ``scope="screen"``: the
    listed shapes only (``cases.plan_checks``), the cheap pass before timing (``verify/staged.py``)."""
    orig_src = Path(task_path).read_text()
    out: dict[str, Verdict] = {}
    todo = []
    for c in candidates:
        bad = policy_check(Path(c["path"]).read_text(), orig_src) if c["path"] != task_path and static_policy \
            else None
        if bad:
            out[c["id"]] = Verdict(candidate_id=c["id"], passed=False, klass=bad[0], reason=bad[1],
                                   backend=backend.name, ran=[STATIC + DECIDED.format(klass=bad[0])],
                                   decided_by=STATIC)
        else:
            todo.append(c)
    if todo:
        key = seal.new_key()
        job = {"kind": "verify", "task": str(Path(task_path).resolve()), "device": backend.torch_device,
               "include_bench": backend.can_time, "allowed_ops": allowed_ops or [],
               "candidates": [{"id": c["id"], "path": str(Path(c["path"]).resolve())} for c in todo],
               "timeout_per_candidate": timeout, "parallel": max(1, min(parallel, os.cpu_count() or 1)),
               "scope": scope}
        n = len(todo)
        budget = timeout * n / (job["parallel"] if not backend.can_time else 1) + 120
        srv = servers.server_for(task_path, backend, parallel) if not alone else None
        if srv is not None:   # the task's judge server: no Python, torch or warm-runner start per round
            r = servers.request(srv, job, key, budget)
        else:
            env = {**servers.server_env(task_path, backend), seal.SEAL_ENV: key,
                   **({JOB_ALONE_ENV: "1"} if alone else {})}
            r = run_job(job, timeout=budget, env=env, memory_bytes=DEFAULT_MEMORY_BYTES.get(backend.name),
                        gpu_lock=backend.can_time)
        answers = (r.result or {}).get("verdicts") if r.ok and r.result else None
        if answers is None:
            klass, reason = job_error(r)
            answers = {c["id"]: {"passed": False, "class": klass, "error": reason} for c in todo}
        else:
            log.debug("verify_round", candidates=n, runners=(r.result or {}).get("runners"), seconds=round(r.seconds, 2))
        own = sum(float((answers.get(c["id"]) or {}).get("seconds") or 0.0) for c in todo)
        overhead = max(0.0, r.seconds - own) / n  # start-up of the job, the original, the cases: shared
        for c in todo:
            a = answers.get(c["id"])
            out[c["id"]] = _verdict_from(c, a, key, backend, float((a or {}).get("seconds") or 0.0) + overhead,
                                         static_policy, scope)
            out[c["id"]].steps = judge_steps(a, key)
        oom = [c for c in todo if out[c["id"]].klass == "out_of_memory"]
        if oom and backend.can_time and not alone and os.environ.get("TRITONDX_LOCK_DIR"):
            log.info("verify_retry_alone", candidates=[c["id"] for c in oom])
            for v in verify_round(task_path, oom, backend, allowed_ops, timeout, 1, alone=True,
                                  static_policy=static_policy, scope=scope):
                v.seconds += out[v.candidate_id].seconds
                out[v.candidate_id] = v
    return [out[c["id"]] for c in candidates]


def verify_all(task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str], timeout: float,
               parallel: int, scope: str = "full") -> list[Verdict]:
    """Every candidate of a round: one judge job for all of them (``verify_round``)."""
    return verify_round(task_path, candidates, backend, allowed_ops, timeout, parallel, scope=scope)
