"""Isolation: a candidate that crashes, hangs, exhausts memory, does not compile or exits is
classified, and the next candidate still runs (each test verifies an honest candidate right
after the bad one). Also: the memory limit reaches the sandboxed job (explicit and default).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.exec.jobs import DEFAULT_MEMORY_BYTES
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
HONEST = HERE.parents[2] / "examples" / "add_tiny_block.py"
HANG_TIMEOUT_S = 15.0
OOM_LIMIT = 4 << 30


def _verify(candidate: Path, timeout: float = 300, memory_bytes: int | None = None) -> Verdict:
    # the source policy off for the bad candidates (it would refuse their ctypes / os / resource):
    # what these cases test is the sandbox around the candidate's process
    return verify_candidate(str(AXPY), str(candidate), candidate.stem, get_backend("interpreter"),
                            allowed_ops=["empty_like"], timeout=timeout, memory_bytes=memory_bytes,
                            static_policy=candidate == HONEST)


@dataclass(frozen=True)
class Isolation:
    id: str
    candidate: str
    expect: tuple[str, ...]      # accepted classes
    reason: str = ""
    timeout: float = 300
    memory_bytes: int | None = None
    cost: float = 12.0

    def run(self) -> tuple[Verdict, Verdict]:
        bad = _verify(HERE / "isolation" / f"{self.candidate}.py", self.timeout, self.memory_bytes)
        after = _verify(HONEST)   # the next candidate, in the same test
        return bad, after


CASES = [
    Isolation("segfault", "iso_segfault", ("segfault",)),
    Isolation("hang", "iso_hang", ("timeout",), "did not finish within 15 s", timeout=HANG_TIMEOUT_S, cost=30.0),
    Isolation("out_of_memory", "iso_out_of_memory", ("out_of_memory",), "memory", memory_bytes=OOM_LIMIT),
    Isolation("compile_error", "iso_compile_error", ("compile_error",), "power of 2"),
    Isolation("os_exit", "iso_os_exit", ("error", "crashed")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_candidate_is_classified_and_the_next_one_runs(case: Isolation, outcomes):
    bad, after = outcomes[case.id].result()
    assert not bad.passed
    assert bad.klass in case.expect, f"{case.candidate}: classified {bad.klass} ({bad.reason}), want {case.expect}"
    assert case.reason in bad.reason, f"{case.candidate}: reason {bad.reason!r} lacks {case.reason!r}"
    assert after.passed, f"the honest candidate after {case.candidate} failed: {after.klass}: {after.reason}"


@dataclass(frozen=True)
class Limit:
    id: str
    memory_bytes: int | None
    want: int
    cost: float = 6.0

    def run(self) -> Verdict:
        return _verify(HERE / "isolation" / "iso_report_limit.py", memory_bytes=self.memory_bytes)


LIMITS = [
    Limit("explicit_limit", 3 << 30, 3 << 30),
    Limit("interpreter_default_limit", None, DEFAULT_MEMORY_BYTES["interpreter"]),
]


@pytest.mark.parametrize("case", LIMITS, ids=[c.id for c in LIMITS])
def test_memory_limit_reaches_the_job(case: Limit, outcomes):
    v = outcomes[case.id].result()
    assert v.klass == "exception", f"{v.klass}: {v.reason}"
    assert f"RLIMIT_AS={case.want}" in v.reason, v.reason


def test_interpreter_default_limit_is_sensible():
    # room for an honest interpreter job (~1 GiB of address space), far below a host's memory
    assert 4 << 30 <= DEFAULT_MEMORY_BYTES["interpreter"] <= 32 << 30


def test_a_dead_runners_last_words_survive_its_folder_being_cleaned(tmp_path):
    """The judge reads a dead runner's stderr through the descriptor the runner writes to, not by path:
    a warm runner's zygote may clean the folder up as soon as its child has ended (on the H200 an
    illegal memory access came back as "(no output)", class ``error``, not ``illegal_memory_access``)."""
    import torch

    from tritondx.tools.verify.judge.spawn import RunnerDied, RunnerProcess
    cand = tmp_path / "dies.py"
    cand.write_text("import os\n\ndef launch(x):\n"
                    "    os.write(2, b'RuntimeError: CUDA error: an illegal memory access was encountered\\n')\n"
                    "    os._exit(1)\n")
    r = RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        r.stderr_path.unlink()  # what a zygote's clean-up does to the folder, here before the death
        with pytest.raises(RunnerDied) as died:
            r.call([torch.ones(4)])
    finally:
        r.close()
    assert died.value.kind == "illegal_memory_access", died.value.message
    assert "illegal memory access" in died.value.message


def test_under_a_profiler_the_runner_keeps_its_sockets_and_pipes_but_no_file(tmp_path):
    """A runner closes every inherited descriptor before candidate code runs; under ncu it keeps the
    sockets and pipes ncu's injected library opened in it (closing them killed the runner: code 11),
    but still closes files (a profiler's log the candidate could otherwise write to)."""
    import os
    import socket

    from tritondx.tools.verify.runner.runner import _closable
    r, w = os.pipe()
    a, b = socket.socketpair()
    f = open(tmp_path / "ncu.log", "w")
    try:
        assert all(_closable(fd, profiled=False) for fd in (r, w, a.fileno(), f.fileno()))
        assert not any(_closable(fd, profiled=True) for fd in (r, w, a.fileno()))
        assert _closable(f.fileno(), profiled=True)
    finally:
        for fd in (r, w):
            os.close(fd)
        a.close(), b.close(), f.close()
