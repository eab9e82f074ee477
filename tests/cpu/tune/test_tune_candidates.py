"""Structural candidates tuned before they are verified (``agents/tuner.py`` ``tune_candidates``): on a backend that
times, the rewriter hands its candidates to the tuner, which searches each one's launch configuration in a job of
its own; a winner replaces the candidate's source (same id, the configuration in its description), a sibling that
differs only in numbers is dropped once the search covered it. ``rows_per_program`` writes its rows per program
as one local that the grid and the kernel read, so the search scales both together: under the interpreter every
rows-per-program size it screens matches the candidate's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tritondx.agents import rewriter as rewriter_mod
from tritondx.agents import tuner as tuner_mod
from tritondx.agents.common import runtime_for
from tritondx.config import RunConfig
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.rewrite.rows_per_program import BLOCK_LOCAL, rows_source
from tritondx.tools.tune import space as spacemod
from tritondx.tools.tune.run import TuneResult, Winner, tune_task
from tritondx.tools.verify.interface import JudgeVerifier

TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * N + cols, x * 2.0 + 1.0, mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.shape[1]
    row_scale_kernel[(x.shape[0],)](x, out, n, BLOCK=triton.next_power_of_2(n), num_warps=1)
    return out


def reference(x):
    return x * 2.0 + 1.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(37, 16)]
BENCH_SHAPES = [(1 << 16, 16)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''


def test_rows_per_program_writes_one_local_the_tuner_scales_with_the_grid(tmp_path):
    src, _ = rows_source(TASK, "row_scale_kernel", 2048, 64)
    assert f"{BLOCK_LOCAL} = max(1, min(64, 2048 //" in src
    assert f"triton.cdiv(x.shape[0], {BLOCK_LOCAL})" in src and f"TDX_BLOCK_R={BLOCK_LOCAL}" in src
    knob = spacemod.build(src).knob("row_scale_kernel.TDX_BLOCK_R")
    assert knob.kind == "tile" and knob.grid_tied
    task = tmp_path / "cand.py"
    task.write_text(src)
    res = tune_task(str(task), tmp_path / "tune", get_backend("interpreter"), budget_s=60)
    assert res.ran and not res.timed and [l["kernel"] for l in res.launches] == ["row_scale_kernel"]
    rows = [t for t in res.trials if "row_scale_kernel.TDX_BLOCK_R" in t["config"]]
    # smaller and larger than written; every size keeps all 37 rows covered (the grid follows the local)
    assert {t["config"]["row_scale_kernel.TDX_BLOCK_R"] for t in rows} >= {1, -1}
    assert rows and all(t["status"] == "ok" for t in rows), rows
    emitted = spacemod.emit(src, {"row_scale_kernel.TDX_BLOCK_R": -1}, res.values)
    assert "_tdx_knob" not in emitted and BLOCK_LOCAL in emitted


def test_a_launch_on_a_one_line_suite_keeps_the_expression_inline():
    src = TASK.replace("    row_scale_kernel[(x.shape[0],)](x, out, n, BLOCK=triton.next_power_of_2(n), num_warps=1)",
                       "    if n: row_scale_kernel[(x.shape[0],)](x, out, n, BLOCK=triton.next_power_of_2(n))")
    out, _ = rows_source(src, "row_scale_kernel", 2048, 64)
    assert BLOCK_LOCAL not in out and "TDX_BLOCK_R=max(1, min(64," in out


@pytest.fixture()
def cuda_like(monkeypatch):
    """The CUDA backend as the nodes see it on a GPU machine (it times kernels); nothing here runs on it."""
    from tritondx.tools.backends.cuda.backend import CudaBackend
    backend = CudaBackend()
    monkeypatch.setattr(tuner_mod, "backend_of", lambda state, cfg: backend)
    monkeypatch.setattr(rewriter_mod, "backend_of", lambda state, cfg: backend)
    return backend


def _cand(tmp_path: Path, cid: str, family: str, source: str, parent: str = "initial") -> dict:
    path = tmp_path / "candidates" / f"{cid}_{family}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    return {"id": cid, "round": 1, "tier": "triage", "family": family, "params": {}, "description": f"{family} idea",
            "motivated_by": [], "prediction": "", "path": str(path), "parent": parent, "signature": cid,
            "origin": "expert"}


def _fake_tune(calls: list, winners: dict[str, str], timed: bool = True):
    def fake(task_path, folder, backend, **kw):
        calls.append(Path(task_path).name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tune.json").write_text(json.dumps({"stand_in": True}))
        src = winners.get(Path(task_path).name)
        return TuneResult(ran=True, timed=timed, knobs=[{"key": "k.TDX_BLOCK_R", "kind": "tile", "params": ["k.TDX_BLOCK_R"]}] if timed else [],
                          winners=[Winner(config={"k.TDX_BLOCK_R": 1}, label="TDX_BLOCK_R x2", median_ms=1.0,
                                          initial_ms=1.4, speedup=1.4, spread=0.01, source=src)] if src else [])
    return fake


def test_the_tuner_tunes_each_family_once_and_drops_numeric_siblings(tmp_path, monkeypatch, cuda_like):
    rows64, _ = rows_source(TASK, "row_scale_kernel", 2048, 64)
    rows128, _ = rows_source(TASK, "row_scale_kernel", 8192, 128)
    other = TASK.replace("x * 2.0 + 1.0, mask", "tl.fma(x, 2.0, 1.0), mask")
    to_tune = [_cand(tmp_path, "r1c1", "rows_per_program", rows64), _cand(tmp_path, "r1c2", "rows_per_program", rows128),
               _cand(tmp_path, "r1c3", "cheap_math", other)]
    calls: list = []
    tuned_src = rows64.replace("min(64, 2048", "min(64, 4096")
    monkeypatch.setattr(tuner_mod, "tune_task", _fake_tune(calls, {"r1c1_rows_per_program.py": tuned_src}))
    state = {"run_dir": str(tmp_path), "task_path": str(tmp_path / "t.py"), "round": 1, "to_tune": to_tune,
             "candidates": [], "backend": "cuda"}
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert cmd.goto == "verifier" and cmd.update["to_tune"] == []
    assert sorted(calls) == ["r1c1_rows_per_program.py", "r1c3_cheap_math.py"]       # one search per family
    cands = {c["id"]: c for c in cmd.update["candidates"]}
    assert list(cands) == ["r1c1", "r1c3"] and cmd.update["pending"] == ["r1c1", "r1c3"]   # r1c2: a size covered
    assert Path(cands["r1c1"]["path"]).name == "r1c1_rows_per_program_tuned.py"
    assert Path(cands["r1c1"]["path"]).read_text() == tuned_src
    assert "its launch tuned: TDX_BLOCK_R x2 (1.40x" in cands["r1c1"]["description"]
    assert cands["r1c1"]["params"]["tuned"] == "TDX_BLOCK_R x2"
    assert cands["r1c3"]["path"].endswith("r1c3_cheap_math.py")                     # no winner: as written
    assert [t["id"] for t in cmd.update["tune"]] == ["tune_r1_r1c1", "tune_r1_r1c3"]
    assert cmd.update["tuned_for"] == ["r1c1", "r1c3"]


def test_a_sibling_is_kept_where_the_search_did_not_time(tmp_path, monkeypatch, cuda_like):
    rows64, _ = rows_source(TASK, "row_scale_kernel", 2048, 64)
    rows128, _ = rows_source(TASK, "row_scale_kernel", 8192, 128)
    to_tune = [_cand(tmp_path, "r1c1", "rows_per_program", rows64), _cand(tmp_path, "r1c2", "rows_per_program", rows128)]
    monkeypatch.setattr(tuner_mod, "tune_task", _fake_tune([], {}, timed=False))
    state = {"run_dir": str(tmp_path), "task_path": str(tmp_path / "t.py"), "round": 1, "to_tune": to_tune,
             "candidates": [], "backend": "cuda"}
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert cmd.update["pending"] == ["r1c1", "r1c2"]


def test_a_structurally_different_sibling_is_kept(tmp_path, monkeypatch, cuda_like):
    a = TASK.replace("x * 2.0 + 1.0, mask", "x * 2.0 + 1.0 + 0.0, mask")
    b = TASK.replace("x * 2.0 + 1.0, mask", "(x + 0.5) * 2.0, mask")
    to_tune = [_cand(tmp_path, "r1c1", "fuse_passes", a), _cand(tmp_path, "r1c2", "fuse_passes", b)]
    monkeypatch.setattr(tuner_mod, "tune_task", _fake_tune([], {}))
    state = {"run_dir": str(tmp_path), "task_path": str(tmp_path / "t.py"), "round": 1, "to_tune": to_tune,
             "candidates": [], "backend": "cuda"}
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert cmd.update["pending"] == ["r1c1", "r1c2"]


def test_the_rewriter_hands_structural_candidates_to_the_tuner_only_where_it_times(tmp_path, monkeypatch):
    from tritondx.agents.common import dump
    from tritondx.tools.evidence.triage import triage
    from tritondx.tools.task.spec import load_task
    task = tmp_path / "task_initial.py"
    task.write_text(TASK.replace("x * 2.0 + 1.0, mask", "libdevice.pow(x, 2.0), mask").replace(
        "import triton.language as tl\n", "import triton.language as tl\nfrom triton.language.extra.cuda import libdevice\n"))
    kclass, found = triage(load_task(task))
    state = {"run_dir": str(tmp_path), "task_path": str(task), "kernel_class": kclass, "findings": dump(found),
             "best": {"id": "initial", "path": str(task), "speedup": 1.0}, "round": 0, "tiers_done": ["triage"],
             "candidates": [], "backend": "cuda"}
    cfg = {"configurable": {"thread_id": "t"}}
    cmd = rewriter_mod.rewriter_node({**state, "backend": "interpreter"}, cfg, runtime_for(RunConfig()))
    assert cmd.goto == "verifier" and cmd.update["candidates"] and "to_tune" not in cmd.update
    from tritondx.tools.backends.cuda.backend import CudaBackend
    monkeypatch.setattr(rewriter_mod, "backend_of", lambda state, cfg: CudaBackend())
    cmd = rewriter_mod.rewriter_node(state, cfg, runtime_for(RunConfig()))
    assert cmd.goto == "tuner" and "candidates" not in cmd.update and "pending" not in cmd.update
    assert {c["family"] for c in cmd.update["to_tune"]} >= {"cheap_math"}
    cmd = rewriter_mod.rewriter_node(state, cfg, runtime_for(RunConfig(tune_candidates=False)))
    assert cmd.goto == "verifier" and cmd.update["candidates"]


PARTS_TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    parts = triton.cdiv(n, 256)
    double_kernel[(parts,)](x, out, n, BLOCK=256)
    return out


def reference(x):
    return x * 2.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(3000,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 0.0, "rtol": 0.0}}
'''


def test_a_literal_block_and_its_cdiv_in_a_grid_local_move_together(tmp_path):
    """``parts = triton.cdiv(n, 256)``, grid ``(parts,)``, ``BLOCK=256`` at the call (absmax_norm's helper wrote
    this; H100 corpus batch_m of 2026-12-06: the search took ``BLOCK=2048`` alone, half the programs it needed, and
    the verifier rejected the candidate): the divisor is the same knob, every size the screen tries is correct."""
    knob = spacemod.build(PARTS_TASK).knob("double_kernel.BLOCK")
    assert knob.grid_tied
    emitted = spacemod.emit(PARTS_TASK, {"double_kernel.BLOCK": -1})
    assert "parts = triton.cdiv(n, 128)" in emitted and "BLOCK=128" in emitted
    task = tmp_path / "parts.py"
    task.write_text(PARTS_TASK)
    res = tune_task(str(task), tmp_path / "tune", get_backend("interpreter"), budget_s=60)
    tiles = [t for t in res.trials if "double_kernel.BLOCK" in t["config"]]
    assert {t["config"]["double_kernel.BLOCK"] for t in tiles} >= {1, -1}
    assert all(t["status"] == "ok" for t in tiles), tiles


def test_a_rewrite_of_a_kernel_body_only_is_not_searched_again(tmp_path, monkeypatch, cuda_like):
    """A candidate whose launch space is its parent's (only a kernel's body changed) keeps the parent's searched
    configuration; one that changed the launch (rows per program) is searched."""
    from tritondx.tools.tune.space import launch_shape
    parent = tmp_path / "task_initial.py"
    parent.write_text(TASK)
    body = TASK.replace("x * 2.0 + 1.0, mask", "tl.fma(x, 2.0, 1.0), mask")
    rows, _ = rows_source(TASK, "row_scale_kernel", 2048, 64)
    assert launch_shape(body) == launch_shape(TASK) != launch_shape(rows)
    calls: list = []
    monkeypatch.setattr(tuner_mod, "tune_task", _fake_tune(calls, {}))
    to_tune = [_cand(tmp_path, "r1c1", "cheap_math", body), _cand(tmp_path, "r1c2", "rows_per_program", rows)]
    state = {"run_dir": str(tmp_path), "task_path": str(parent), "round": 1, "to_tune": to_tune, "candidates": [],
             "backend": "cuda", "best": {"id": "initial", "path": str(parent)}}
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert calls == ["r1c2_rows_per_program.py"] and cmd.update["pending"] == ["r1c1", "r1c2"]
    assert cmd.update["tuned_for"] == ["r1c2", "r1c1"]   # r1c1: its parent's search covers it (no retune next round)


SHARED_TILE_TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def block_rowsum_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        m = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0), axis=1)
    tl.store(out_ptr + rows, acc, mask=rows < M)


def launch(x):
    M, N = x.shape
    out = torch.empty(M, device=x.device, dtype=torch.float32)
    BLOCK = 16
    block_rowsum_kernel[(triton.cdiv(M, BLOCK),)](x, out, M, N, BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return out


def reference(x):
    return x.float().sum(dim=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(37, 50)]
BENCH_SHAPES = [(4096, 512)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}}
'''


def test_two_tiles_of_one_launch_from_one_definition_are_two_knobs(tmp_path):
    """``BLOCK_M=BLOCK, BLOCK_N=BLOCK`` (lightllm's and the Triton tutorial's attention launchers): the second tile
    is its own knob, scaled at its argument; the definition, and the grid that reads it, follow the first."""
    sp = spacemod.build(SHARED_TILE_TASK)
    m, n = sp.knob("block_rowsum_kernel.BLOCK_M"), sp.knob("block_rowsum_kernel.BLOCK_N")
    assert m.grid_tied and not n.grid_tied and m.params == ["block_rowsum_kernel.BLOCK_M"]
    emitted = spacemod.emit(SHARED_TILE_TASK, {"block_rowsum_kernel.BLOCK_N": 1, "block_rowsum_kernel.BLOCK_M": -1})
    assert "BLOCK = 8" in emitted and "BLOCK_M=BLOCK, BLOCK_N=BLOCK * 2)" in emitted
    task = tmp_path / "shared.py"
    task.write_text(SHARED_TILE_TASK)
    res = tune_task(str(task), tmp_path / "tune", get_backend("interpreter"), budget_s=60)
    ns = [t for t in res.trials if "block_rowsum_kernel.BLOCK_N" in t["config"]]
    assert {t["config"]["block_rowsum_kernel.BLOCK_N"] for t in ns} >= {1, -1}
    assert all(t["status"] == "ok" for t in res.trials), [t for t in res.trials if t["status"] != "ok"]


def test_a_tuned_candidate_that_fails_is_verified_as_written(tmp_path, monkeypatch, cuda_like):
    """A structural candidate whose tuned launch fails verification is checked again as written, same id, and the
    one that passes is what the state keeps (batch_m: absmax_norm's tuned launch failed and the task lost a 1.7x
    rewrite that had verified as written); a candidate the tuner did not change gets no second check."""
    from tritondx.agents import verifier as verifier_mod
    from tritondx.tools.records.verify import Verdict
    rows64, _ = rows_source(TASK, "row_scale_kernel", 2048, 64)
    other = TASK.replace("x * 2.0 + 1.0, mask", "tl.fma(x, 2.0, 1.0), mask")
    to_tune = [_cand(tmp_path, "r1c1", "rows_per_program", rows64), _cand(tmp_path, "r1c2", "cheap_math", other)]
    tuned_src = rows64.replace("min(64, 2048", "min(64, 4096")
    monkeypatch.setattr(tuner_mod, "tune_task", _fake_tune([], {"r1c1_rows_per_program.py": tuned_src}))
    state = {"run_dir": str(tmp_path), "task_path": str(tmp_path / "t.py"), "round": 1, "to_tune": to_tune,
             "candidates": [], "backend": "cuda"}
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    cands = {c["id"]: c for c in cmd.update["candidates"]}
    assert cands["r1c1"]["as_written"].endswith("r1c1_rows_per_program.py") and not cands["r1c2"].get("as_written")
    seen: list[list[str]] = []

    def fake_verify_all(task, pending, backend, ops, timeout, parallel, scope="full"):
        seen.append([Path(c["path"]).name for c in pending])
        ok = ["_tuned" not in Path(c["path"]).name and "cheap" not in Path(c["path"]).name for c in pending]
        return [Verdict(candidate_id=c["id"], passed=k, klass="" if k else "mismatch", backend="cuda")
                for c, k in zip(pending, ok)]
    monkeypatch.setattr(JudgeVerifier, "verify", lambda self, *a, **k: fake_verify_all(*a, **k))
    monkeypatch.setattr(verifier_mod, "backend_of", lambda state, cfg: cuda_like)
    vstate = {**state, "to_tune": [], "candidates": list(cands.values()), "pending": cmd.update["pending"]}
    out = verifier_mod.verifier_node(vstate, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert seen == [["r1c1_rows_per_program_tuned.py", "r1c2_cheap_math.py"], ["r1c1_rows_per_program.py"]]
    assert out.update["round_result"]["passed"] == ["r1c1"] and out.goto == "bench"
    kept = out.update["candidates"]
    assert [c["id"] for c in kept] == ["r1c1"] and kept[0]["path"].endswith("r1c1_rows_per_program.py")
    assert "tuned" not in kept[0]["params"] and kept[0]["as_written"] is None
    assert kept[0]["description"] == ("rows_per_program idea; as written: its tuned launch (TDX_BLOCK_R x2) failed "
                                      "verification (mismatch)")
    assert {v["id"]: v["passed"] for v in out.update["verifications"]} == {"r1c1": True, "r1c2": False}
    # a person approved the tuned source: nothing else is checked in its place
    seen.clear()
    out = verifier_mod.verifier_node(vstate, {"configurable": {"thread_id": "t"}},
                                     runtime_for(RunConfig(interactive=True)))
    assert len(seen) == 1 and out.update["round_result"]["passed"] == [] and "candidates" not in out.update
