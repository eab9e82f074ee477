"""Orchestrator side of verification: the static policy, then the judge job; a verdict only counts
when the judge sealed it (``seal.py``)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tritondx.tools.backends.base import Backend
from tritondx.tools.verify import seal
from tritondx.tools.verify.jobs import DEFAULT_MEMORY_BYTES, job_error, run_device_job
from tritondx.tools.verify.policy import check as policy_check
from tritondx.tools.verify.records import CheckRecord, Verdict


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
                       ran=["static policy"])
    key = seal.new_key()
    job = {"kind": "verify", "task": str(Path(task_path).resolve()), "candidate": str(Path(candidate_path).resolve()),
           "device": backend.torch_device, "include_bench": include_bench, "allowed_ops": allowed_ops or []}
    if memory_bytes is None:
        memory_bytes = DEFAULT_MEMORY_BYTES.get(backend.name)
    r, seconds, device_s = run_device_job(job, backend, timeout, memory_bytes, extra_env={seal.SEAL_ENV: key},
                                          candidate=candidate_id)
    ran = (["static policy"] if static_policy else []) + list((r.result or {}).get("ran") or [])
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
    return Verdict(candidate_id=candidate_id, passed=False, klass=klass, reason=reason[:600], backend=backend.name,
                   seconds=seconds, device_s=device_s, ran=ran)


def verify_all(task_path: str, candidates: list[dict], backend: Backend, allowed_ops: list[str], timeout: float,
               parallel: int) -> list[Verdict]:
    """Each candidate in its own judge job; several at once (they only share the device)."""
    def one(c: dict) -> Verdict:
        return verify_candidate(task_path, c["path"], c["id"], backend, include_bench=backend.can_time,
                                allowed_ops=allowed_ops, timeout=timeout)

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, os.cpu_count() or 1))) as pool:
        return list(pool.map(one, candidates))
