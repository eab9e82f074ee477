"""The profile tier on a backend that times: it reuses the bench of the round that escalated to it when that bench
timed the initial and the best kernel (no second bench job), and reads ncu's counters beside its own bench when it
needs one. Run on CPU with the bench and ncu jobs faked."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tritondx.agents import profiler
from tritondx.agents.common import runtime_for
from tritondx.config import RunConfig
from tritondx.tools.backends.cuda.backend import CudaBackend
from tritondx.tools.evidence.ncu import NcuSession
from tritondx.tools.records.evidence import ArtifactRef
from tritondx.tools.run.phases import PHASE, part

TASK = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"
NCU_DEVICE_S = 2.5   # what the faked launch job says it held the device
CEILINGS = {"copy_bytes_per_s": 4e12, "matmul_flops_per_s": {"bf16": 8e14, "tf32": 4e14, "fp32": 5e13}}


def _variant(ms):
    return {"median_ms": ms, "spread": 0.01, "round_medians_ms": [ms] * 3}


def _bench(variants):
    return {"device": "H200", "ceilings": CEILINGS,
            "shapes": [{"shape": [4096], "dtype": "torch.float32", "bytes": 3 * 4096 * 4, "flops": 0,
                        "variants": {k: _variant(v) for k, v in variants.items()}}]}


def _state(tmp_path, best_id, artifacts):
    cand = tmp_path / "r1c2.py"
    cand.write_text(TASK.read_text())
    best = {"id": best_id, "path": str(cand if best_id != "initial" else TASK)}
    return {"task_path": str(TASK), "run_dir": str(tmp_path), "backend": "cuda", "target": "cuda:90", "round": 1,
            "best": best, "artifacts": artifacts}


RT = runtime_for(RunConfig(backend="cuda"))


def _fakes(monkeypatch, ncu_s=0.0):
    calls = {"bench": 0, "ncu": []}

    def bench(task, variants, backend, rounds=5, timeout=900):
        calls["bench"] += 1
        calls["bench_at"] = time.monotonic()
        time.sleep(0.5)
        return _bench({v["id"]: 0.01 for v in variants}), "", 0.5

    def counters(path, original=None):
        assert original is not None, "the profile tier names the run's original task (its trusted compiles)"
        calls["ncu"].append((time.monotonic(), threading.current_thread().name))
        time.sleep(ncu_s)
        return NcuSession(note="ncu faked: no counters", device_seconds=NCU_DEVICE_S, profiler_seconds=ncu_s)

    monkeypatch.setattr(profiler, "bench_variants", bench)
    monkeypatch.setattr(profiler, "profile_session", counters)
    monkeypatch.setattr(profiler, "backend_of", lambda state, cfg: CudaBackend())
    monkeypatch.setattr(CudaBackend, "nsight_compute", property(lambda self: True), raising=False)
    monkeypatch.setattr(profiler, "work_for_bench", lambda *a, **k: None)
    return calls


def test_the_profile_tier_reuses_the_escalating_rounds_bench(tmp_path, monkeypatch):
    calls = _fakes(monkeypatch)
    ref = ArtifactRef.write(tmp_path / "artifacts", "bench_round1.json",
                            json.dumps(_bench({"initial": 0.02, "r1c2": 0.015, "r1c3": 0.03})), "bench")
    cmd = profiler.profiler_node(_state(tmp_path, "r1c2", {"bench_round1": ref.model_dump()}),
                                 {"configurable": {"thread_id": "t"}}, RT)
    assert calls["bench"] == 0 and len(calls["ncu"]) == 1
    # the ncu session's device time counts (the reused bench's was counted by its round)
    assert cmd.update["cost"]["device:held"] == pytest.approx(NCU_DEVICE_S)
    prof = json.loads(Path(cmd.update["artifacts"]["profile_round1"]["path"]).read_text())
    assert set(prof["shapes"][0]["variants"]) == {"initial", "best"}
    assert prof["shapes"][0]["variants"]["best"]["median_ms"] == 0.015 and prof["reused_from"] == ref.path
    assert any(f.get("metric", {}).get("median_ms") == 0.015 for f in cmd.update["findings"])


def test_a_round_bench_without_the_best_a_changed_artifact_or_none_means_a_bench_of_its_own(tmp_path, monkeypatch):
    calls = _fakes(monkeypatch)
    ref = ArtifactRef.write(tmp_path / "artifacts", "bench_round1.json",
                            json.dumps(_bench({"initial": 0.02, "r1c3": 0.03})), "bench")
    profiler.profiler_node(_state(tmp_path, "r1c2", {"bench_round1": ref.model_dump()}), {"configurable": {"thread_id": "t"}}, RT)
    assert calls["bench"] == 1
    ok = ArtifactRef.write(tmp_path / "artifacts", "bench_round1.json",
                           json.dumps(_bench({"initial": 0.02, "r1c2": 0.015})), "bench")
    Path(ok.path).write_text(json.dumps(_bench({"initial": 0.02, "r1c2": 0.001})))   # changed after it was written
    profiler.profiler_node(_state(tmp_path, "r1c2", {"bench_round1": ok.model_dump()}), {"configurable": {"thread_id": "t"}}, RT)
    assert calls["bench"] == 2
    profiler.profiler_node(_state(tmp_path, "initial", {}), {"configurable": {"thread_id": "t"}}, RT)
    assert calls["bench"] == 3


def test_ncu_reads_the_counters_beside_the_tiers_own_bench(tmp_path, monkeypatch):
    calls = _fakes(monkeypatch, ncu_s=0.5)
    t0 = time.monotonic()
    cmd = profiler.profiler_node(_state(tmp_path, "initial", {}), {"configurable": {"thread_id": "t"}}, RT)
    wall = time.monotonic() - t0
    assert calls["bench"] == 1 and len(calls["ncu"]) == 1
    assert abs(calls["ncu"][0][0] - calls["bench_at"]) < 0.3 and calls["ncu"][0][1].startswith("tdx-profile-ncu")
    ph = part(cmd.update["cost"], PHASE)
    assert ph["ncu"] >= 0.5 and ph["ncu"] + ph["bench"] <= wall + 0.05
