"""Structural rewrites beside the tuner's winners (``agents/rewriter.py`` ``beside_tune``, called by the tuner node
on a backend that times): the rewrites the evidence suggests are built on the best winner's source and join the
tuner's round, numbered after the winners, with the winner as their parent; the tuner's own families are left
out; the setting 0 turns it off. The tuner node's own path is run with a tune job stood in for (its job needs a
GPU to time) and the CUDA backend, which times, so its round carries both kinds of candidate to the verifier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tritondx.agents import rewriter as rewriter_mod
from tritondx.agents import tuner as tuner_mod
from tritondx.agents.common import dump, runtime_for
from tritondx.agents.rewriter import beside_tune
from tritondx.config import RunConfig
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.evidence.triage import triage
from tritondx.tools.task.spec import load_task
from tritondx.tools.tune.run import TuneResult, Winner

TASK = '''import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def square_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, libdevice.pow(x, 2.0), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    square_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


def reference(x):
    return x * x


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''

#: the tuner's winner: the same kernel with another block (what ``space.emit`` writes)
WINNER = TASK.replace("triton.cdiv(n, 1024)", "triton.cdiv(n, 4096)").replace("BLOCK=1024", "BLOCK=4096")


@pytest.fixture(autouse=True)
def cuda_like(monkeypatch):
    """The CUDA backend as the nodes see it on a GPU machine (it times kernels); nothing here runs on it."""
    from tritondx.tools.backends.cuda.backend import CudaBackend
    backend = CudaBackend()
    monkeypatch.setattr(tuner_mod, "backend_of", lambda state, cfg: backend)
    monkeypatch.setattr(rewriter_mod, "backend_of", lambda state, cfg: backend)
    assert backend.can_time and not get_backend("interpreter").can_time
    return backend


def _state(tmp_path: Path) -> dict:
    task = tmp_path / "task_initial.py"
    task.write_text(TASK)
    kclass, found = triage(load_task(task))
    return {"run_dir": str(tmp_path), "task_path": str(task), "kernel_class": kclass, "findings": dump(found),
            "best": {"id": "initial", "path": str(task), "speedup": 1.0}, "round": 0, "tiers_done": ["triage"],
            "candidates": [], "backend": "cuda"}


def test_the_rewrite_is_built_on_the_winner_and_numbered_after_it(tmp_path):
    state = _state(tmp_path)
    winner = tmp_path / "candidates" / "r1c1_tune.py"
    winner.parent.mkdir()
    winner.write_text(WINNER)
    records, trail = beside_tune(state, RunConfig(), str(winner), "r1c1", [], 1, 2)
    assert [(r["id"], r["family"], r["parent"]) for r in records] == [("r1c2", "cheap_math", "r1c1")]
    src = Path(records[0]["path"]).read_text()
    assert "BLOCK=4096" in src and "libdevice.pow(x, 2.0)" not in src      # the winner's values, the rewrite's math
    assert {t["family"] for t in trail} >= {"cheap_math"} and all(t["round"] == 1 for t in trail)
    assert not {t["family"] for t in trail if t.get("outcome") == "proposed"} & {"launch_config", "autotune"}
    assert beside_tune(state, RunConfig(rewrites_beside_tune=0), str(winner), "r1c1", [], 1, 2) == ([], [])


def test_a_second_size_of_a_rewrite_does_not_crowd_out_the_next_family(tmp_path, monkeypatch):
    """A family that offers two sizes of one rewrite (sources that differ only in numbers) takes one of the two slots
    beside the tune; the next family the evidence suggests gets the other. Two different rewrites of one family (one
    per kernel) are not siblings: both are kept."""
    from tritondx.tools.records.evidence import Finding
    from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteFamily

    def two_sizes(ctx):
        return [Proposal("two_sizes", ctx.spec.source.replace("4096", str(n)), {"n": n}, f"size {n}", [])
                for n in (2048, 8192)]
    monkeypatch.setitem(CATALOG, "two_sizes", RewriteFamily("two_sizes", "a stand-in family", two_sizes, 1))
    state = _state(tmp_path)
    winner = tmp_path / "candidates" / "r1c1_tune.py"
    winner.parent.mkdir()
    winner.write_text(WINNER)
    why = Finding(id="x", detector="stand_in", tier="triage", stage="source", message="m", suggests=["two_sizes"])
    records, _ = beside_tune(state, RunConfig(), str(winner), "r1c1", [why], 1, 2)
    assert [r["family"] for r in records] == ["two_sizes", "cheap_math"]

    def two_kernels(ctx):
        return [Proposal("two_sizes", ctx.spec.source + f"\n\ndef helper_{name}():\n    return 0\n", {}, name, [])
                for name in ("a", "b")]
    monkeypatch.setitem(CATALOG, "two_sizes", RewriteFamily("two_sizes", "a stand-in family", two_kernels, 1))
    records, _ = beside_tune(state, RunConfig(), str(winner), "r1c1", [why], 1, 2)
    assert [r["family"] for r in records] == ["two_sizes", "two_sizes"]


def test_a_rewrite_round_whose_candidates_are_searched_leaves_out_a_second_size(tmp_path, monkeypatch):
    """On a backend that times, each candidate's launch is searched before it is verified and a family's second size
    is dropped as covered: the round leaves it out, and the next family gets the slot."""
    from tritondx.tools.records.evidence import Finding
    from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteFamily

    def two_sizes(ctx):
        return [Proposal("two_sizes", ctx.spec.source.replace("1024", str(n)), {"n": n}, f"size {n}", [])
                for n in (2048, 8192)]
    monkeypatch.setitem(CATALOG, "two_sizes", RewriteFamily("two_sizes", "a stand-in family", two_sizes, 1))
    state = _state(tmp_path)
    state["findings"] += dump([Finding(id="x", detector="stand_in", tier="triage", stage="source", message="m",
                                       suggests=["two_sizes"])])
    cmd = rewriter_mod.rewriter_node(state, {"configurable": {"thread_id": "t"}},
                                     runtime_for(RunConfig(candidates_per_round=2)))
    assert cmd.goto == "tuner"
    assert [r["family"] for r in cmd.update["to_tune"]] == ["two_sizes", "cheap_math"]


def test_the_tuner_round_carries_winners_and_rewrites_to_the_verifier(tmp_path, monkeypatch):
    state = _state(tmp_path)

    def fake_tune(task_path, folder, backend, **kw):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tune.json").write_text(json.dumps({"stand_in": True}))
        if Path(task_path).name != "task_initial.py":   # the rewrite's own search (tune_candidates): no winner
            return TuneResult(ran=True, timed=True)
        return TuneResult(ran=True, timed=True, winners=[Winner(
            config={"square_kernel.BLOCK": 4096}, label="BLOCK 1024->4096", median_ms=1.0, initial_ms=1.5,
            speedup=1.5, spread=0.01, source=WINNER)])

    monkeypatch.setattr(tuner_mod, "tune_task", fake_tune)
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}}, runtime_for(RunConfig()))
    assert cmd.goto == "verifier"
    cands = cmd.update["candidates"]
    assert [(c["id"], c["family"], c["parent"]) for c in cands] == [("r1c1", "tune", "initial"),
                                                                   ("r1c2", "cheap_math", "r1c1")]
    assert cmd.update["pending"] == ["r1c1", "r1c2"]
    assert "libdevice.pow" not in Path(cands[1]["path"]).read_text()
    # a body-only rewrite of the winner has the winner's launch space: not searched again (tune_candidates)
    assert [t["id"] for t in cmd.update["tune"]] == ["tune_r1"]
    assert cmd.update["tuned_for"] == ["initial", "r1c2"]   # as searched as its parent: no retune if it wins
    cmd = tuner_mod.tuner_node(state, {"configurable": {"thread_id": "t"}},
                               runtime_for(RunConfig(rewrites_beside_tune=0)))
    assert [c["family"] for c in cmd.update["candidates"]] == ["tune"]


#: a multi-pass row kernel written for the tests
PASSES = (Path(__file__).resolve().parents[1] / "rewrite" / "kernels" / "passes_norm.py").read_text()


def test_a_rewrite_that_keeps_the_old_code_for_long_rows_keeps_the_original_there(tmp_path):
    """row_resident keeps the old kernel for rows longer than its block behind ``if _row_block <= 16384``; built on
    the tuner's winner that side holds the winner's ``num_warps=2``, which the judge must see taken and no checked
    size takes; built on the tuned subject it is the original's code and needs no check. The proposal comes from the
    subject, with the subject as its parent."""
    from tritondx.agents.rewriter import _unchecked_sides
    from tritondx.tools.records.evidence import Finding
    task = tmp_path / "task_initial.py"
    task.write_text(PASSES)
    kclass, found = triage(load_task(task))
    state = {"run_dir": str(tmp_path), "task_path": str(task), "kernel_class": kclass, "findings": dump(found),
             "best": {"id": "initial", "path": str(task), "speedup": 1.0}, "round": 0, "tiers_done": ["triage"],
             "candidates": [], "backend": "cuda"}
    winner = tmp_path / "candidates" / "r1c1_tune.py"
    winner.parent.mkdir()
    winner.write_text(PASSES.replace("x.shape[1], 16)", "x.shape[1], 16, num_warps=2)"))
    why = Finding(id="mp", detector="multi_pass_loops", tier="triage", stage="source", message="m",
                  kernel="passes_norm_kernel", suggests=["fuse_passes"])
    cfg = RunConfig(rewrites_beside_tune=1)
    records, _ = beside_tune(state, cfg, str(winner), "r1c1", [why], 1, 2)   # no subject: built on the winner
    assert [(r["family"], r["parent"]) for r in records] == [("fuse_passes", "r1c1")]
    assert _unchecked_sides(PASSES, Path(records[0]["path"]).read_text()) == 2     # both sides of the new test
    records, _ = beside_tune(state, cfg, str(winner), "r1c1", [why], 1, 2, subject=("initial", str(task)))
    assert [(r["family"], r["parent"]) for r in records] == [("fuse_passes", "initial")]
    src = Path(records[0]["path"]).read_text()
    assert "num_warps=2" not in src and "_row_block <= 16384" in src and _unchecked_sides(PASSES, src) == 1   # the new side
