"""``tritondx verify TASK CANDIDATE``: one candidate file through the verifier node's code path
(probe of the task, ``verify_all``, and on a timing backend ``time_round`` and ``select``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from tritondx.errors import TaskFormatError
from tritondx.tools.backends.base import Backend
from tritondx.tools.records.verify import DECIDED, HardwareCheck, Verdict
from tritondx.tools.verify.select import beats, summarize_bench
from tritondx.tools.verify.timing import HW_UNAVAILABLE, NCU_MISSING, hardware_check, time_round
from tritondx.tools.verify.verification import verify_all


#: the checks after the judge's, in the order they run (``Verdict.ran``)
BENCH = "benchmark job (timing functions, side by side with the initial kernel)"
TIMED_OUTPUTS = "timed outputs vs reference (bench job: each round's last call and one random call)"
ROOFLINE = "roofline floor (bench)"
HARDWARE = "hardware check (ncu kernel durations)"


class FileCheck(BaseModel):
    verdict: Verdict
    speedup: float | None = None      # initial / candidate, when timed
    timing: str = ""                  # why it is (not) measurably faster, or why it was not timed
    hardware: HardwareCheck | None = None


def check_candidate_file(task_path: str, candidate_path: str, backend: Backend, timeout: float = 600,
                         bench_rounds: int = 5, bench_timeout: float = 900) -> FileCheck:
    from tritondx.tools.task.probe_job import probe_task
    src = Path(candidate_path)
    if not src.is_file():
        raise TaskFormatError(candidate_path, "no such file")
    try:
        compile(src.read_text(), candidate_path, "exec")
    except SyntaxError as exc:  # worded as `optimize` words it for a task (tools/task/spec.py)
        raise TaskFormatError(candidate_path, f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TaskFormatError(candidate_path, f"not a Python source file: {exc}") from None
    probe = probe_task(task_path, backend)
    cand = {"id": src.stem, "path": str(src.resolve()), "family": "file", "motivated_by": []}
    verdict = verify_all(task_path, [cand], backend, probe.get("ops", []), timeout, 1)[0]
    if not verdict.passed or not backend.can_time:
        return FileCheck(verdict=verdict, timing="" if verdict.passed else "not timed: rejected")
    ran = list(verdict.ran)

    def rejected(klass: str, reason: str, check: str, **kw) -> FileCheck:
        trail = ran + [check + DECIDED.format(klass=klass)]
        return FileCheck(verdict=verdict.model_copy(update={"passed": False, "klass": klass, "reason": reason,
                                                            "ran": trail, "decided_by": check}), **kw)

    timed = time_round(task_path, {}, [cand], backend, bench_rounds, bench_timeout)
    if not timed.survivors or timed.result is None:
        bad = timed.rejected[0] if timed.rejected else {"klass": "bench_failed", "reason": timed.error}
        check = TIMED_OUTPUTS if bad["klass"] == "timed_output_mismatch" else BENCH
        return rejected(bad["klass"], bad["reason"], check)
    ran += [BENCH, TIMED_OUTPUTS, ROOFLINE]
    summary = summarize_bench(timed.result, ["initial", cand["id"]])
    s = summary.get(cand["id"])
    if s and s["impossible"]:
        return rejected("faster_than_roofline", "measured time is below what the roofline allows", ROOFLINE)
    speedup = summary["initial"]["median_ms"] / s["median_ms"] if s else None
    why = beats(timed.result, summary, cand["id"], "initial")
    if not why:
        return FileCheck(verdict=verdict.model_copy(update={"speed_measured": True, "ran": ran}), speedup=speedup,
                         timing="not measurably faster than the initial kernel")
    hw = hardware_check(task_path, cand["path"], speedup, backend) if backend.nsight_compute else None
    if hw is not None and not hw.confirmed and not hw.note.startswith((NCU_MISSING, HW_UNAVAILABLE)):
        return rejected("hardware_unconfirmed", f"claimed {speedup:.2f}x not confirmed: {hw.note}", HARDWARE,
                        speedup=speedup, timing=why, hardware=hw)
    if hw is not None:
        ran.append(HARDWARE)
    return FileCheck(verdict=verdict.model_copy(update={"speed_measured": True, "ran": ran}), speedup=speedup,
                     timing=why, hardware=hw)
