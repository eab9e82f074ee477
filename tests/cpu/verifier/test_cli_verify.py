"""``tritondx verify TASK CANDIDATE``: the verifier node's code path for one file; exit 0 only when
verified, 1 when rejected, 2 (one line) on bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, "-m", "tritondx.cli", "verify", *args, "--backend", "interpreter"],
                          capture_output=True, text=True, timeout=600, env=env)


@dataclass(frozen=True)
class CliCase:
    id: str
    candidate: Path
    cost: float = 14.0

    def run(self) -> subprocess.CompletedProcess:
        return _cli(str(AXPY), str(self.candidate))


CASES = [CliCase("cli:honest", HERE.parents[2] / "examples" / "add_tiny_block.py"),
         CliCase("cli:cheat", HERE / "attacks" / "t01_empty_original_checks.py")]


@pytest.mark.parametrize("case", CASES[:1], ids=["honest"])
def test_an_honest_candidate_is_verified_exit_0(case, outcomes):
    r = outcomes[case.id].result()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verified:" in r.stdout and "checks run: static policy" in r.stdout, r.stdout
    assert "speed: not measured on interpreter" in r.stdout


@pytest.mark.parametrize("case", CASES[1:], ids=["cheat"])
def test_a_cheat_is_rejected_exit_1_with_its_reason(case, outcomes):
    r = outcomes[case.id].result()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "rejected:" in r.stdout and "verifier_tampering" in r.stdout, r.stdout


def test_a_missing_candidate_is_one_line_exit_2(tmp_path):
    r = _cli(str(AXPY), str(tmp_path / "nope.py"))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tritondx: error: ") and "nope.py: no such file" in lines[0], \
        r.stderr


def test_a_wrong_cuda_side_is_rejected_on_the_cpu_by_the_device_flip(tmp_path):
    """A candidate that branches on ``x.is_cuda`` (here its CUDA side is wrong, alpha 0) is checked on the CPU
    with that test flipped to its CUDA side (tools/verify/plan/flip.py): rejected, exit 1, the reason naming the
    flip. Before the flip it was verified with a note that its CUDA side was not checked."""
    src = AXPY.read_text().replace("    axpy_kernel[grid](x, y, out, n, 2.5, BLOCK=BLOCK, num_warps=1)",
                                   "    alpha = 0.0 if x.is_cuda else 2.5\n"
                                   "    axpy_kernel[grid](x, y, out, n, alpha, BLOCK=BLOCK, num_warps=1)")
    assert "x.is_cuda" in src
    cand = tmp_path / "cuda_side_wrong.py"
    cand.write_text(src)
    r = _cli(str(AXPY), str(cand))
    assert r.returncode == 1, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("rejected:") and "mismatch: the CUDA side of the device-kind test(s) at line(s) 31 " \
        "failed under the device flip" in first, first


def test_a_cuda_side_checked_flipped_is_said_on_the_verdict_line():
    r = _cli(str(AXPY), str(HERE / "flips" / "h01_sm_count_helper.py"))
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("verified:") and "2 device-kind branch side(s) of another device checked here" in first \
        and "not checked" not in first, first
    assert any("with the added device-kind tests flipped to their CUDA side" in ln for ln in r.stdout.splitlines()), \
        r.stdout
