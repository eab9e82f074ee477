"""How many candidates of a round a judge checks at once (judge.verify_round): one warm runner per
candidate up to ``parallel`` (the job caps it at the CPU count), on a GPU too (its threads share one
device hold); one at a time in a job whose every phase is exclusive (a retry after a CUDA OOM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritondx.tools.verify.judge import job as judge_mod
from tritondx.tools.verify.judge.candidate import Judge
from tritondx.tools.verify.judge import warm

AXPY = Path(__file__).resolve().parents[1] / "verifier" / "tiny_axpy.py"


class _Pool:
    slots_seen: list[int] = []

    def __init__(self, device, hide, slots=1):
        _Pool.slots_seen.append(slots)
        self.shared, self.warm, self.why_cold, self.forked = False, False, "test", 0

    def close(self):
        pass


@pytest.mark.parametrize("device,parallel,n,want", [("cpu", 2, 2, 2), ("cpu", 4, 3, 3), ("cpu", 2, 5, 2),
                                                     ("cpu", 1, 4, 1), ("cuda:0", 4, 4, 4),
                                                     ("cuda:0-alone", 4, 4, 1)])
def test_slots_per_round(monkeypatch, tmp_path, device, parallel, n, want):
    monkeypatch.chdir(tmp_path)
    if device.endswith("-alone"):
        from tritondx.tools.exec.gpulock import JOB_ALONE_ENV
        monkeypatch.setenv(JOB_ALONE_ENV, "1")
        device = device[:-len("-alone")]
    monkeypatch.setattr(warm, "RunnerPool", _Pool)
    monkeypatch.setattr(Judge, "run", lambda self: {"passed": True})
    _Pool.slots_seen = []
    cands = [{"id": f"c{i}", "path": str(AXPY)} for i in range(n)]
    job = {"kind": "verify", "task": str(AXPY), "device": device, "allowed_ops": [], "candidates": cands,
           "parallel": parallel}
    out = judge_mod.verify_round(job, "k" * 64)
    assert sorted(out["verdicts"]) == sorted(c["id"] for c in cands)
    assert _Pool.slots_seen == [want]
