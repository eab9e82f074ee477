"""Derived sizes per dimension and what a verdict says it ran (issue 34), on the interpreter backend.

``dims/g01_k_loop_one_short.py`` (``for k in range(0, K - 1, BLOCK_K)``) is wrong only where K leaves a remainder of 1
in BLOCK_K = 16: no listed K (40, 48), nor the odd (41) or larger (48) derived size, has one. The planner reads which
block constant tiles which dimension (``tools/verify/plan/tiles.py``) and adds sizes with remainders 1 and block-1 and the
size block+1 in each such dimension (``cases._Planner._per_dimension``), within the budget of input elements.
"""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.task.module import as_tuple, load_module
from tritondx.tools.verify.plan import shapes as sh
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
GEMM, AXPY, SOFTMAX = HERE / "tiny_gemm.py", HERE / "tiny_axpy.py", HERE / "tiny_softmax.py"
D = HERE / "dims"


def _tiles(task: Path, candidate: Path):
    from tritondx.tools.verify.plan.tiles import block_tiles
    mod = load_module(str(task), f"orig_{task.stem}")
    base = min((tuple(s) for s in mod.CHECK_SHAPES), key=sh.numel)
    moved = sh.moved_shape(base)
    dt = mod.DTYPES[0]
    return block_tiles(ast.parse(candidate.read_text()), base, as_tuple(mod.make_inputs(base, dt, 0, "cpu")),
                       moved, as_tuple(mod.make_inputs(moved, dt, 0, "cpu")))


def test_block_constants_are_read_per_dimension():
    got = {(t.dim, t.param, t.block, t.value) for t in _tiles(GEMM, D / "g02_honest_tiles.py")}
    assert got == {(0, "M", "BLOCK_M", 32), (1, "N", "BLOCK_N", 16), (2, "K", "BLOCK_K", 8)}, got
    assert {(t.dim, t.block, t.value) for t in _tiles(AXPY, AXPY)} == {(0, "BLOCK", 128)}
    assert {(t.dim, t.block, t.value) for t in _tiles(SOFTMAX, SOFTMAX)} == {(1, "BLOCK", 256)}


@pytest.mark.parametrize("configs", [
    "[triton.Config({'BLOCK_K': 8}), triton.Config({'BLOCK_K': 32})]",
    "[triton.Config({'BLOCK_K': b}, num_warps=w) for b in BLOCKS for w in (2, 4) if b * w < 256]",
    "[triton.Config({'BLOCK_K': 8})] + [triton.Config({'BLOCK_K': b}) for b, _ in [(32, 1)]]",
    "CONFIGS",
])
def test_an_autotuned_block_is_read_from_its_configs(tmp_path, configs):
    """A literal list, a comprehension over a module-level list (FLA's form), lists joined with ``+`` or a
    module-level name: every value a config gives the block is a block to derive remainders for."""
    src = (D / "g02_honest_tiles.py").read_text()
    assert src.count("@triton.jit") == 1
    src = src.replace("@triton.jit", "BLOCKS = [8, 32]\nCONFIGS = [triton.Config({'BLOCK_K': 8}), "
                                     "triton.Config({'BLOCK_K': 32})]\n\n\n"
                                     f"@triton.autotune(configs={configs}, key=['K'])\n@triton.jit")
    src = src.replace(", BLOCK_K=BLOCK_K)", ")")
    p = tmp_path / "tuned.py"
    p.write_text(src)
    assert {t.value for t in _tiles(GEMM, p) if t.dim == 2} == {8, 32}


def test_residue_sizes():
    from tritondx.tools.verify.plan.tiles import residue_sizes
    assert [v for v, _ in residue_sizes(16, 40)] == [33, 47, 17]
    assert [v for v, _ in residue_sizes(32, 24)] == [33, 63]          # block+1 is the remainder-1 size here
    assert all(v % 16 in (1, 15) for v, _ in residue_sizes(16, 1000))


def _plan(task: Path, candidate: Path):
    from tritondx.tools.verify.plan.cases import plan_checks
    return plan_checks(load_module(str(task), f"orig_{task.stem}"), task.read_text(), candidate.read_text(), "cpu")


def test_the_plan_has_every_remainder_per_dimension_and_lists_them():
    p = _plan(GEMM, D / "g01_k_loop_one_short.py")
    per_dim = [c for c in p.cases if c.why.startswith("derived per dimension")]
    for dim in range(3):
        mods = {c.shape[dim] % 16 for c in per_dim if c.shape[:dim] + c.shape[dim + 1:] == (32, 24, 40)[:dim] +
                (32, 24, 40)[dim + 1:]}
        assert {1, 15} <= mods, (dim, [c.shape for c in per_dim])
    assert any(c.shape[2] == 17 for c in per_dim)                      # block+1
    note = next(n for n in p.notes if n.startswith("per-dimension sizes"))
    assert "BLOCK_K=16 tiles dim 2 (K)" in note and "K=33 (remainder 1 of 16)" in note, note
    cap = sh.ELEMENT_BUDGET["cpu"]
    for c in per_dim:
        m, n, k = c.shape
        assert m * k + k * n <= cap


def test_the_larger_size_is_within_a_budget_of_input_elements(tmp_path):
    """A GEMM whose listed (128, 128, 64) has 1M elements by the product of its dims but 16k input elements: the
    budget (2^18 input elements on the CPU) leaves room for a larger size. It was "no larger shape: the largest listed
    one fills the device's budget" (issue 34)."""
    task = tmp_path / "gemm_big.py"
    task.write_text(GEMM.read_text().replace("CHECK_SHAPES = [(32, 24, 40), (48, 40, 48)]",
                                             "CHECK_SHAPES = [(32, 24, 40), (128, 128, 64)]"))
    p = _plan(task, task)
    assert not any("no larger shape" in n for n in p.notes), p.notes
    [big] = [c.shape for c in p.cases if "larger than every listed" in c.why]
    m, n, k = big
    inputs = m * k + k * n
    assert inputs > 2 * (128 * 64 + 64 * 128) and inputs <= sh.ELEMENT_BUDGET["cpu"], big
    assert math.prod(big) > sh.ELEMENT_BUDGET["cpu"]    # the product alone would have said no


@dataclass(frozen=True)
class Case:
    task: Path
    candidate: Path
    expect: str | None
    static: bool = False
    cost: float = 14.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"dims:{self.candidate.stem}:{self.expect or 'PASS'}:{self.static}")

    @property
    def candidate_path(self) -> Path:
        return self.candidate

    @property
    def round(self) -> tuple:
        """Verified with the other cases of its task and policy in one round (verifier/conftest.py)."""
        return (self.task, self.static, ("empty", "empty_like"), 300)

    def run(self) -> Verdict:
        return verify_candidate(str(self.task), str(self.candidate), self.candidate.stem, get_backend("interpreter"),
                                allowed_ops=["empty", "empty_like"], timeout=300, static_policy=self.static)


CASES = [Case(GEMM, D / "g01_k_loop_one_short.py", "mismatch"),
         Case(GEMM, D / "g01_k_loop_one_short.py", "mismatch", static=True),
         Case(GEMM, D / "g02_honest_tiles.py", None)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_k_loop_one_short_is_rejected_at_a_remainder_of_one(case: Case, outcomes):
    v = outcomes[case.id].result()
    if case.expect is None:
        assert v.passed, f"honest {case.candidate.name} rejected as {v.klass}: {v.reason}"
        assert any(line.startswith("per-dimension sizes: BLOCK_M=32 tiles dim 0 (M)") for line in v.coverage), \
            v.coverage
        return
    assert not v.passed, f"{case.candidate.name} PASSED the verifier"
    assert v.klass == "mismatch", (v.klass, v.reason)
    k = int(v.reason.split("shape (")[1].split(")")[0].split(",")[2])
    assert k % 16 == 1, f"rejected at K={k}, not at a remainder of 1 in BLOCK_K: {v.reason}"
    # the verdict lists every check that ran, in order, and marks the one that decided (not "static policy")
    assert v.decided_by == "values vs reference (judge)", v.decided_by
    decided = [r for r in v.ran if "[decided" in r]
    assert decided == ["values vs reference (judge) [decided: mismatch]"], v.ran
    order = [r.split(" [")[0] for r in v.ran]
    first = ["static policy"] if case.static else []
    assert order[:len(first) + 2] == first + [
        "case plan (listed shapes, derived sizes per dimension, branch sides, value stress; fresh seeds per call)",
        "candidate import (timing functions, threads)"], v.ran
    assert order.index("launch() ran without error") < order.index("input mutation") < \
        order.index("values vs reference (judge)")


def test_a_static_rejection_says_the_static_policy_decided():
    v = verify_candidate(str(AXPY), str(HERE / "cheats" / "c01b_calls_reference.py"), "c01b",
                         get_backend("interpreter"), allowed_ops=["empty", "empty_like"])
    assert v.klass == "calls_reference" and v.ran == ["static policy [decided: calls_reference]"], v.ran
    assert v.decided_by == "static policy"


@dataclass(frozen=True)
class CliCase:
    id: str = "dims:cli:g01"
    cost: float = 20.0

    def run(self) -> subprocess.CompletedProcess:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        return subprocess.run([sys.executable, "-m", "tritondx.cli", "verify", str(GEMM),
                               str(D / "g01_k_loop_one_short.py"), "--backend", "interpreter"],
                              capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("case", [CliCase()], ids=["cli"])
def test_the_cli_verdict_line_names_the_check_that_decided(case, outcomes):
    """``tritondx verify``: the issue's rejected verdict said "checks run: static policy" although the value
    comparison ran and failed."""
    r = outcomes[case.id].result()
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("checks run: "))
    assert line.startswith("checks run: static policy, case plan"), line
    assert "values vs reference (judge) [decided: mismatch]" in line, line
    sizes = next(ln for ln in r.stdout.splitlines() if ln.startswith("checked: per-dimension sizes: "))
    assert "BLOCK_K=16 tiles dim 2 (K)" in sizes and "K=33 (remainder 1 of 16)" in sizes, sizes
