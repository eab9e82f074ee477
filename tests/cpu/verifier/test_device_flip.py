"""The device flip (tools/verify/plan/flip.py): on the CPU the CUDA side of every device-kind test a
candidate adds (``if x.is_cuda:``, ``x.device.type == "cuda"``, ternaries) is checked with those tests
flipped to their CUDA side, in a runner of its own where device queries answer as an H200.

Before the flip every cheat under flips/d0* was verified on the CPU (its CUDA side was dead code here,
"not checked"); each test below fails with ``Judge._flipped`` turned off.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate
from tritondx.tools.verify.plan.branches import added_branches
from tritondx.tools.verify.plan.cases import BranchCoverage, CheckCase, device_sides
from tritondx.tools.verify.plan.flip import flip_branches, flip_cases, flipped_source

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
FLIPPED = "checked here with the device-kind tests flipped"


@dataclass(frozen=True)
class FlipCase:
    name: str
    expect: str | None                 # rejection class; None: verified
    reason: tuple[str, ...] = ()
    cost: float = 16.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"flip:{self.name}")

    @property
    def candidate_path(self) -> Path:
        return HERE / "flips" / f"{self.name}.py"

    @property
    def round(self) -> tuple:
        """Verified with the other flips in one round (verifier/conftest.py)."""
        return (AXPY, True, (), 300)

    def run(self) -> Verdict:
        return verify_candidate(str(AXPY), str(HERE / "flips" / f"{self.name}.py"), self.name,
                                get_backend("interpreter"), timeout=300)


CHEATS = [
    FlipCase("d01_if_cuda_wrong_alpha", "mismatch", ("failed under the device flip", "flipped to the CUDA side")),
    FlipCase("d02_ternary_alpha", "mismatch", ("failed under the device flip",)),
    FlipCase("d03_device_type_skips_tail", "mismatch", ("failed under the device flip",)),
    # tries to tell the flip from a GPU: the nested test is an added branch; the flip answers as a GPU
    FlipCase("d04_detects_flip_is_available", "mismatch", ("failed under the device flip",)),
    # tries to tell the flip from a GPU by the tensors' device: its GPU side never runs anywhere
    FlipCase("d05_detects_flip_by_device_index", "unchecked_branch",
             ("x.device.index is None", "true by line trace", "never ran its false side")),
    # a CUDA side that cannot run here is not verified
    FlipCase("d06_cuda_side_synchronizes", "exception", ("failed under the device flip", "launch() raised")),
    # a device-kind part of a larger test: its true side was "dead code" for every size on the CPU
    FlipCase("d07_cuda_and_size", "mismatch", ("failed under the device flip",)),
    # the same detection as d05 in a conditional expression: its sides told apart by instruction positions
    FlipCase("d08_detects_flip_in_a_ternary", "unchecked_branch",
             ("x.device.index is None", "true by line trace", "never ran its false side")),
    FlipCase("d09_device_index_ternary", "unchecked_branch",
             ("x.device.index is None", "true by line trace", "never ran its false side")),
    FlipCase("d10_is_available_ternary", "mismatch", ("failed under the device flip",)),
]
HONEST = FlipCase("h01_sm_count_helper", None)


@pytest.mark.parametrize("case", CHEATS, ids=[c.name for c in CHEATS])
def test_a_cuda_side_cheat_is_rejected_on_the_cpu(case, outcomes):
    v = outcomes[case.id].result()
    assert not v.passed, f"{case.name} verified: {v.coverage}"
    assert v.klass == case.expect, f"{v.klass}: {v.reason}"
    for part in case.reason:
        assert part in v.reason, v.reason


@pytest.mark.parametrize("case", [HONEST], ids=["honest"])
def test_an_honest_sm_count_helper_passes_with_its_cuda_side_checked_flipped(case, outcomes):
    v = outcomes[case.id].result()
    assert v.passed, f"{v.klass}: {v.reason}"
    flipped = [r for r in v.records if r.flipped]
    assert flipped and len(flipped) < len(v.records), v.records
    device_lines = [c for c in v.coverage if "is_cuda" in c]
    assert len(device_lines) == 2, v.coverage          # the helper's `if t.is_cuda` and the BLOCK ternary
    assert all(FLIPPED in c and "dead code on this device" not in c for c in device_lines), device_lines
    assert any(c.startswith("shape (4097,) dtype float32 flipped to the CUDA side seed") for c in v.coverage)


SRC = '''import torch

def sms(t):
    if t.is_cuda:
        return 132
    return 4

def launch(x):
    b = 1024 if x.is_cuda else 16   # keep
    if (x.device.type
            != "cuda"):
        b += 1
    if x.device.type == "cuda" and b:
        b += 2
    if x.device.type != "cuda":
        b += 3
    return b, sms(x)
'''


def _flips(src: str, device: str = "cpu") -> list[BranchCoverage]:
    out = []
    for b in added_branches("", src):
        bc = BranchCoverage(branch=b, status="dynamic")
        device_sides(bc, device)
        out.append(bc)
    return flip_branches(out, device)


def test_flipped_source_replaces_each_device_kind_test_by_its_cuda_side_and_keeps_every_line():
    flips = _flips(SRC)
    # `x.device.type == "cuda" and b` combines a device-kind part with another: that part is flipped
    assert sorted(bc.branch.line for bc in flips) == [4, 9, 10, 13, 15], [bc.branch.test for bc in flips]
    out = flipped_source(SRC, flips)
    lines, new = SRC.splitlines(), out.splitlines()
    assert len(new) == len(lines)
    assert new[3] == "    if True     :"
    assert new[8] == "    b = 1024 if True      else 16   # keep"   # columns after the test kept
    assert new[9] == "    if ((False" and new[10] == ")):"   # a part over two lines: both kept
    assert new[12].startswith("    if True ") and new[12].endswith(" and b:")
    assert new[14].startswith("    if False ") and "cuda" not in new[14]
    assert new[13] == lines[13]
    ns: dict = {}
    exec(compile(out, "flipped.py", "exec"), ns)
    import torch
    assert ns["launch"](torch.empty(1)) == (1024 + 2, 132)   # every device part at its CUDA value, on a CPU tensor


def test_no_flip_on_a_cuda_device_and_none_for_a_test_the_original_has():
    assert _flips(SRC, "cuda:0") == []
    orig = "def sms(t):\n    if t.is_cuda:\n        return 132\n    return 4\n"
    assert added_branches(orig, orig) == []


def test_flip_cases_take_every_shape_and_value_kind_once_the_dtypes_in_turn():
    cases = [CheckCase(shape=s, dtype=d, seed=i, values=v, why="listed in CHECK_SHAPES")
             for i, (s, d, v) in enumerate([((8,), "float32", "normal"), ((8,), "float16", "normal"),
                                            ((9,), "float32", "normal"), ((9,), "float16", "normal"),
                                            ((8,), "float32", "large")])]
    got = flip_cases(cases, ["float32", "float16"])
    assert [(c.shape, c.dtype, c.values) for c in got] == [((8,), "float32", "normal"), ((9,), "float16", "normal"),
                                                           ((8,), "float32", "large")]
    assert all(c.flipped and c.label().endswith("flipped to the CUDA side") for c in got)
    assert got[0].why.startswith("listed")   # a listed case stays listed (never dropped as outside the contract)
    assert all(c.seed not in range(5) for c in got)   # fresh seeds


FAKE_PROBE = '''
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("fake_gpu", sys.argv[1])
fake = importlib.util.module_from_spec(spec); spec.loader.exec_module(fake)
cand = sys.argv[2]
fake.install(cand)
ns = {"torch": torch}
exec(compile("def q():\\n    p = torch.cuda.get_device_properties('cpu')\\n"
             "    return p.multi_processor_count, p.major, torch.cuda.is_available()\\n", cand, "exec"), ns)
print(ns["q"]())
print(torch.cuda.is_available())
try:
    torch.cuda.get_device_properties(0)
    print("fake answered the test file")
except Exception as exc:
    print("real:", type(exc).__name__)
'''


def test_fake_device_queries_answer_only_the_candidates_file(tmp_path):
    """An H200's answers to calls from the candidate's file; torch, Triton and the runner get the real ones."""
    probe = tmp_path / "probe.py"
    probe.write_text(FAKE_PROBE)
    fake = HERE.parents[2] / "tools" / "verify" / "runner" / "fake_gpu.py"
    r = subprocess.run([sys.executable, str(probe), str(fake), str(tmp_path / "candidate.py")], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "(132, 9, True)" and out[1] == "False" and out[2].startswith("real:"), out


def test_flipped_source_refuses_a_branch_it_cannot_find():
    flips = _flips(SRC)
    with pytest.raises(ValueError):
        flipped_source(SRC.replace("    if t.is_cuda:", "    if t.is_cuda: pass\n    if 1:"), flips)
    assert ast.parse(flipped_source(SRC, []))   # nothing to flip: the source as it is


def test_the_flip_through_warm_runners_in_one_round():
    """A round's candidates in one judge job (``verify_round``): the flipped runners are forked by the same warm
    runner as the others; a cheat between two honest candidates is rejected, both honest ones verified."""
    import structlog
    from tritondx.tools.verify.verification import verify_round
    flips = HERE / "flips"
    order = [("h_first", flips / "h01_sm_count_helper.py"), ("cheat", flips / "d01_if_cuda_wrong_alpha.py"),
             ("h_last", flips / "h01_sm_count_helper.py")]
    with structlog.testing.capture_logs() as logs:
        verdicts = verify_round(str(AXPY), [{"id": i, "path": str(p)} for i, p in order], get_backend("interpreter"),
                                [], 300, 1)
    runners = [e.get("runners") for e in logs if e.get("event") == "verify_round"]
    assert runners and runners[0].startswith("warm"), runners
    by_id = {v.candidate_id: v for v in verdicts}
    assert not by_id["cheat"].passed and "failed under the device flip" in by_id["cheat"].reason, by_id["cheat"]
    for i in ("h_first", "h_last"):
        v = by_id[i]
        assert v.passed and any(r.flipped for r in v.records), f"{i}: {v.klass} {v.reason}"
