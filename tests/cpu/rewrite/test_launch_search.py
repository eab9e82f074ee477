"""The launch-space search: enumeration, evidence pruning (static bounds, ptxas), the device-seconds budget, and
at most one configuration where nothing can time it."""

from __future__ import annotations

from tritondx.tools.rewrite.base import CATALOG
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.launch_config import SM90_SMEM_PER_PROGRAM
from tritondx.tools.rewrite.launch_search import plan, ptxas_compile_fn


def _ctx(rw, name, can_time):
    ctx = rw.make_context(name, ["launch_config"])
    ctx.can_time = can_time
    return ctx


def test_space_pruned_by_static_bounds_and_cut_by_the_budget(rw):
    ctx = _ctx(rw, "launch_sgemm_defaults", True)
    p = plan(ctx, budget_s=12, per_config_s=1.5)
    assert p.max_configs == 8
    by = {}
    for r in p.records:
        by.setdefault(r.status, []).append(r)
    assert len(by["emitted"]) == 8 and len(p.sources) == 8
    assert by["over_budget"] and all("pays for 8" in r.reason for r in by["over_budget"])
    # 256x256 tiles of fp16 with 128-deep K at 5 stages: 5 * (256*128 + 128*256) * 2 B of operand buffers
    big = next(r for r in by["pruned"] if r.values == {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128,
                                                       "num_warps": 8, "num_stages": 5})
    assert f"{5 * 2 * 256 * 128 * 2} B > {SM90_SMEM_PER_PROGRAM} B" in big.reason
    acc = next(r for r in by["pruned"] if r.values["BLOCK_M"] == 256 and r.values["BLOCK_N"] == 256
               and r.values["num_warps"] == 4 and "registers" in r.reason)
    assert "512 registers/thread" in acc.reason
    # the measured prior (128x128x64, 8 warps, 3 stages) is the best-ranked configuration
    assert p.emitted()[0].values == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
    # every emitted source sets its values where they are defined (sgemm's signature defaults)
    first = p.sources[p.emitted()[0].config_id]
    assert "def sgemm(a, b, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)" in first


def test_ptxas_figures_prune_and_are_kept_as_evidence(rw):
    ctx = _ctx(rw, "launch_two_levels", True)
    calls = []

    def fake_ptxas(source):   # stands for the compile-only job: BLOCK >= 4096 reported over the shared-memory limit
        calls.append(source)
        big = any(f"BLOCK = {b}" in source for b in (4096, 8192, 16384))
        return [{"kernel": "scale_kernel", "registers": 40, "num_warps": 4,
                 "shared_bytes": SM90_SMEM_PER_PROGRAM + 1024 if big else 0, "spill_bytes": 0}]

    p = plan(ctx, compile_fn=fake_ptxas, budget_s=6, per_config_s=1.5, compile_checks=20)
    pruned = [r for r in p.records if r.reason.startswith("ptxas:")]
    assert pruned and all(r.values["BLOCK"] >= 4096 for r in pruned)
    assert f"{SM90_SMEM_PER_PROGRAM + 1024} B shared memory > {SM90_SMEM_PER_PROGRAM} B" in pruned[0].reason
    assert pruned[0].evidence["shared_bytes"] == SM90_SMEM_PER_PROGRAM + 1024
    assert all(r.values["BLOCK"] < 4096 and r.evidence["registers"] == 40 for r in p.emitted())
    assert len(p.emitted()) == 4


def test_ptxas_compile_only_on_cpu(rw, tmp_path):
    """The real compile-only job (cuda:90 on this CPU) gives ptxas registers for an emitted configuration."""
    ctx = _ctx(rw, "launch_two_levels", True)
    fn = ptxas_compile_fn(str(rw.task_path("launch_two_levels")), tmp_path)
    p = plan(ctx, compile_fn=fn, budget_s=1.5, per_config_s=1.5, compile_checks=1)
    (r,) = p.emitted()
    assert r.evidence["registers"] > 0 and r.evidence["spill_bytes"] == 0


def test_without_timing_one_configuration_at_most(rw, tmp_path):
    ctx = _ctx(rw, "launch_two_levels", False)
    p = plan(ctx)
    assert len(p.emitted()) == 1 and p.max_configs == 1
    assert all(r.reason == "backend cannot time: one configuration emitted" for r in p.records
               if r.status == "over_budget")
    # through the expert: the search adds nothing to a round on the interpreter ...
    assert [x for x in propose(ctx, limit=4) if x.family == "launch_search"] == []
    rw.verify("launch_two_levels", p.sources[p.emitted()[0].config_id], tmp_path)
    # ... and on a device that times, its batch comes on top of the round's limit
    gpu_ctx = _ctx(rw, "launch_two_levels", True)
    gpu = propose(gpu_ctx, limit=4)
    assert sum(x.family == "launch_search" for x in gpu) > 1
    assert len([x for x in gpu if x.family != "launch_search"]) <= 4
    assert gpu_ctx.search_records and CATALOG["launch_search"].batch


def test_the_search_buys_configurations_launch_config_does_not_propose(rw):
    """The budget pays for new configurations: none of the search's is one launch_config already proposes
    (with 3 configurations a round, the top-ranked ones were all launch_config's and the search added none)."""
    from tritondx.tools.rewrite.launch_config import launch_config
    ctx = _ctx(rw, "launch_two_levels", True)
    theirs = {p.source for p in launch_config(ctx)}
    p = plan(ctx, exclude=frozenset(theirs))
    assert p.max_configs == 3 and len(p.sources) == 3          # 30 s budget at 10 s a configuration
    assert not theirs & set(p.sources.values())
    assert any(r.reason == "launch_config proposes this configuration this round" for r in p.records)


def test_compile_checks_run_several_at_once(rw, monkeypatch):
    """ptxas checks are separate sandboxed jobs: they run COMPILE_JOBS at a time, at most twice the
    configurations emitted, and the plan is the same as one after another."""
    import threading
    import time

    from tritondx.tools.rewrite import launch_search as ls
    live, peak, calls, lock = [0], [0], [0], threading.Lock()

    def fake(source):
        with lock:
            live[0] += 1
            calls[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        return [{"kernel": k, "registers": 32, "shared_bytes": 0, "spill_bytes": 0, "num_warps": 4}
                for k in ("copy_kernel", "scale_kernel", "kernel")]
    ctx = _ctx(rw, "launch_two_levels", True)
    monkeypatch.setattr(ls, "COMPILE_JOBS", 1)
    serial = plan(ctx, compile_fn=fake, budget_s=30, per_config_s=10)
    monkeypatch.setattr(ls, "COMPILE_JOBS", 3)
    peak[0], calls[0] = 0, 0
    parallel = plan(ctx, compile_fn=fake, budget_s=30, per_config_s=10)
    assert peak[0] >= 2 and calls[0] <= 6
    assert [r.model_dump() for r in serial.records] == [r.model_dump() for r in parallel.records]


def test_several_configurations_compile_in_one_job_with_the_same_figures(rw, tmp_path, monkeypatch):
    """``ptxas_compile_fn(...).many``: the configurations of a search compile in one capture job (one Python start
    and torch import, no SASS) and give the figures single jobs give; a job that fails as a whole (no candidate's
    answer known) falls back to one job per configuration; a candidate that does not compile is None alone."""
    from tritondx.tools.rewrite.launch_config import apply_config
    from tritondx.tools.verify import api

    task = rw.task_path("launch_two_levels")
    src = task.read_text()
    ctx = _ctx(rw, "launch_two_levels", True)
    p = plan(ctx, compile_checks=0)
    a, b = (apply_config(src, {r.kernel: r.values}) for r in p.emitted()[:2])
    fn = ptxas_compile_fn(str(task), tmp_path)
    single = [fn(a), fn(b)]
    assert all(x and x[0]["registers"] > 0 for x in single)
    broken = src.replace("def launch(", "def launch(*_a, **_k):\n    raise RuntimeError('no')\n\ndef _old(", 1)
    many = fn.many([a, broken, b])
    assert many[0] == single[0] and many[2] == single[1] and many[1] is None
    calls = []
    monkeypatch.setattr(api, "capture_many", lambda *x, **k: (calls.append(1), (None, "crashed: signal 11"))[1])
    fn = ptxas_compile_fn(str(task), tmp_path / "again")
    assert fn.many([a, b]) == single and calls == [1]
