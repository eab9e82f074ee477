"""The trusted half of verification: the ``verify`` job (runs in a sandboxed worker, never imports
candidate code).

It loads the ORIGINAL task (the user's own code: its reference may launch the original's Triton
kernels) and checks one candidate (``verify``) or every candidate of a round (``verify_round``: the
original loaded once, each case's inputs and reference made once, ``case_data.py``; warm runners,
``warm.py``), each by a ``Judge`` (``candidate.py``: its checks, case by case). Every verdict goes
back to the orchestrator sealed with a key only this process got (``seal.py``).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.task.module import load_module
from tritondx.tools.verify.judge import prestart, seal
from tritondx.tools.verify.judge.case_data import CaseData
from tritondx.tools.verify.judge.contract import OriginalContract
from tritondx.tools.verify.judge.candidate import Judge


def verify(job: dict[str, Any]) -> dict[str, Any]:
    """Job kind ``verify``. The seal key is taken out of the environment before anything else runs.
    With ``candidates`` (a round): every candidate, each verdict sealed (``verify_round``)."""
    key = prestart.key()
    if "candidates" in job:
        return verify_round(job, key)
    judge = Judge(job)
    try:
        result = judge.run()
    except Rejected as exc:
        result = {"passed": False, "class": exc.klass, "error": exc.reason, "ran": judge.rejected_trail(exc.klass),
                  "coverage": judge.planned()}
    return seal.sign(key, {**result, "steps": judge.step_seconds()})


def _watchdog(judge: Judge, seconds: float, fired: list) -> threading.Timer:
    """Ends the candidate's runner when its checks take longer than ``seconds`` (the judge's next
    read then fails and the candidate is rejected with a timeout)."""
    def fire() -> None:
        fired.append(True)
        runner = getattr(judge, "runner", None)
        if runner is None:
            return
        try:
            if hasattr(runner, "zygote"):
                runner._end("kill", 5)
            else:
                runner.proc.kill()
        except Exception:  # noqa: BLE001 - the runner may be gone already
            pass
    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


def verify_round(job: dict[str, Any], key: str, pool=None, orig=None) -> dict[str, Any]:
    """Every candidate of a round in one judge job: the original loaded once, one plan of check cases
    (the same seeds for all: drawn here, never sent anywhere but as inputs), each case's inputs and
    reference made once (``CaseData``), runners forked by warm runners (``warm.py``) where that is
    safe. ``parallel`` candidates at once (on a GPU their device phases are one shared hold of this
    process, ``gpulock._shared``). Returns ``{"verdicts": {id: sealed result}, "runners": "warm"|"cold: why"}``.
    ``pool`` and ``orig``: a judge server's warm runners and loaded original (``server.py``), kept
    across its requests: used here, never closed here."""
    from tritondx.tools.exec.gpulock import usage
    from tritondx.tools.verify.judge.warm import RunnerPool
    from concurrent.futures import ThreadPoolExecutor
    device = job["device"]
    cands = job["candidates"]
    parallel = prestart.slots(job)
    # the warm runners start (Python, torch, Triton) while this process imports torch (started by the
    # worker: prestart.py), loads the original and makes the cases' inputs and references
    owned = pool is None   # a server's pool outlives this request
    started = prestart.pool() if owned else None
    if not owned:
        starter, pool_f = None, None
    elif started is not None:
        starter, pool_f = started
    else:
        starter = ThreadPoolExecutor(max_workers=1)  # kept until the end (see below)
        pool_f = starter.submit(RunnerPool, device, [os.getcwd()], parallel) if len(cands) > 1 else None
    orig = orig if orig is not None else load_module(job["task"], "orig")
    orig_src = Path(job["task"]).read_text()
    per_timeout = float(job.get("timeout_per_candidate") or 600)
    # each candidate's judge plans its own checks (the branches it must reach are its own); the loaded
    # original, the case data made for identical cases, and the warm runners are shared
    cases, plan_error = None, ""
    data = CaseData(orig, device)
    contract = OriginalContract(job["task"], orig, device, [os.getcwd()])   # started when a case needs it
    if owned:
        pool = pool_f.result() if pool_f is not None else None
    if pool is not None and pool.shared:
        parallel = 1  # its zygote cleans mounts the other runners' folders are in (warm.Zygote.shared)

    def one(c: dict) -> dict[str, Any]:
        t0, u0 = time.monotonic(), usage()
        fired: list = []
        judge = Judge({**job, "candidate": c["path"]}, orig=orig, cases=cases, data=data, pool=pool,
                      contract=contract)
        timer = _watchdog(judge, per_timeout, fired)
        try:
            if plan_error:
                raise Rejected("exception", plan_error)
            result = judge.run()
        except Rejected as exc:
            result = {"passed": False, "class": exc.klass, "error": exc.reason,
                      "ran": judge.rejected_trail(exc.klass), "coverage": judge.planned()}
        finally:
            timer.cancel()
        if fired:
            result = {"passed": False, "class": "timeout", "ran": judge.rejected_trail("timeout"),
                      "error": f"the candidate's checks did not finish within {per_timeout:.0f} s"}
        u1 = usage()
        result = {**result, "seconds": round(time.monotonic() - t0, 3), "steps": judge.step_seconds(),
                  "device_usage": {k: round(u1[k] - u0.get(k, 0.0), 4) for k in u1}}
        return seal.sign(key, result)

    try:
        if parallel > 1:
            with ThreadPoolExecutor(max_workers=parallel) as ex:
                results = list(ex.map(one, cands))
        else:
            results = [one(c) for c in cands]
    finally:
        runners = (f"warm ({pool.forked} forked, {'one at a time in the judge job' if pool.shared else 'own namespaces'})"
                   if pool is not None and pool.warm else f"cold: {pool.why_cold if pool else 'one candidate'}")
        if pool is not None and owned:
            pool.close()
        contract.close()
        # (the pool's zygotes are started by its own thread, ended by close above)
        if starter is not None:
            starter.shutdown(wait=True)
    return {"verdicts": {c["id"]: r for c, r in zip(cands, results)}, "runners": runners}
