"""The profile tier's ncu session starts outside the profiler lock (``ncu.profile_counters``, ``launch._gate``): the
launch job's Python, torch and the task load first, and the lock is taken only when the job says it is ready, before
its first CUDA call; a job that fails before that never takes the lock. ncu itself is replaced by a script that runs
its target as ncu would (no GPU here: the job then fails at its first CUDA call, after the go)."""

from __future__ import annotations

import contextlib
import stat
import time
from pathlib import Path

from tritondx.tools.evidence import ncu

AXPY = Path(__file__).parents[1] / "verifier" / "tiny_axpy.py"


def _fake_ncu(tmp_path: Path) -> str:
    exe = tmp_path / "ncu"
    exe.write_text('#!/bin/sh\n# the last five arguments are the target: python -m worker JOB RESULT\n'
                   f'env > {tmp_path}/ncu_env.txt\nshift $(($# - 5))\nexec "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def _marking_task(tmp_path: Path, broken: bool = False) -> Path:
    task = tmp_path / "marked_task.py"
    mark = ("import time as _t\n"
            "with open(__file__[:-3] + '.imported', 'a') as _f:\n    _f.write(repr(_t.time()) + '\\n')\n")
    task.write_text(mark + ("raise ImportError('broken task')\n" if broken else "") + AXPY.read_text())
    return task


def _record_lock(monkeypatch) -> list[float]:
    taken: list[float] = []

    @contextlib.contextmanager
    def profiler(*a, **kw):
        taken.append(time.time())
        yield
    monkeypatch.setattr(ncu, "profiler", profiler)
    return taken


def test_the_launch_job_loads_before_the_profiler_lock_is_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "ncu_path", lambda: _fake_ncu(tmp_path))
    taken = _record_lock(monkeypatch)
    task = _marking_task(tmp_path)
    rows, note = ncu.profile_counters(str(task), timeout=300)
    assert rows == [] and note.startswith("ncu gave no counters"), note   # no GPU: the job fails after the go
    marked = task.with_suffix(".imported")
    assert marked.exists(), "the job never imported the task"
    imports = [float(x) for x in marked.read_text().split()]
    # the gated session, then (no counters past the gate) once more the way it ran before: the lock from the start
    assert len(taken) == 2 and len(imports) == 2, (taken, imports)
    assert imports[0] < taken[0], "the profiler lock was taken before the job had loaded the task"
    assert taken[1] < imports[1], "the retry did not hold the lock from its start"


def test_a_job_that_ends_before_its_gate_takes_no_lock_and_runs_once_more_the_old_way(tmp_path, monkeypatch):
    """A job that ends before its gate (here its import fails; on a GPU also a gate whose descriptors did not reach it)
    made no CUDA call: the gated attempt never takes the lock, and the retry runs with the lock from its start, so a
    gate that does not work under some ncu costs time, never the counters."""
    monkeypatch.setattr(ncu, "ncu_path", lambda: _fake_ncu(tmp_path))
    taken = _record_lock(monkeypatch)
    t0 = time.monotonic()
    task = _marking_task(tmp_path, broken=True)
    rows, note = ncu.profile_counters(str(task), timeout=300)
    imports = [float(x) for x in task.with_suffix(".imported").read_text().split()]
    assert rows == [] and "no counters" in note, note
    assert len(imports) == 2 and len(taken) == 1 and imports[0] < taken[0] < imports[1], (imports, taken)
    assert time.monotonic() - t0 < 120


def test_the_original_task_reads_its_trusted_compiles_and_a_candidate_does_not(tmp_path, monkeypatch):
    """``original``: the run's original task under ncu reads the task's trusted Triton cache layer (its compiles are
    not done again while the profiler lock is held); another file (a candidate) gets no trusted layer."""
    from tritondx.tools.exec import triton_cache

    monkeypatch.setenv("TRITONDX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(triton_cache, "enabled", lambda: True)
    monkeypatch.setattr(ncu, "ncu_path", lambda: _fake_ncu(tmp_path))
    _record_lock(monkeypatch)
    task = _marking_task(tmp_path)
    triton_cache.trusted_dir(task.read_text()).mkdir(parents=True)
    ncu.profile_counters(str(task), timeout=300, original=str(task))
    env = (tmp_path / "ncu_env.txt").read_text()
    assert f"{triton_cache.TRUSTED_ENV}={triton_cache.trusted_dir(task.read_text())}" in env
    assert f"TRITON_CACHE_MANAGER={triton_cache.MANAGER}" in env
    other = tmp_path / "candidate.py"
    other.write_text(task.read_text())
    ncu.profile_counters(str(other), timeout=300, original=str(task))
    assert triton_cache.TRUSTED_ENV not in (tmp_path / "ncu_env.txt").read_text()


def test_gate_descriptors_that_do_not_reach_the_job_cost_a_retry_not_the_counters(tmp_path, monkeypatch):
    """A wrapper that does not pass the gate's pipes on (here a stand-in for ncu that closes them): the job ends before
    any CUDA call, the gated attempt takes no lock, and the session runs once more the old way, promptly."""
    from tritondx.tools.bench.launch import GATE_ENV

    exe = tmp_path / "ncu"
    exe.write_text('#!/bin/sh\nfds=$(printenv %s | tr , " ")\nfor fd in $fds; do eval "exec $fd>&-"; done\n'
                   'shift $(($# - 5))\nexec "$@"\n' % GATE_ENV)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(ncu, "ncu_path", lambda: str(exe))
    taken = _record_lock(monkeypatch)
    task = _marking_task(tmp_path)
    t0 = time.monotonic()
    rows, note = ncu.profile_counters(str(task), timeout=300)
    imports = [float(x) for x in task.with_suffix(".imported").read_text().split()]
    # the gated job is ended as soon as its ready pipe closes (it may not have imported the task yet); the retry
    # holds the lock from its start
    assert rows == [] and len(taken) == 1 and 1 <= len(imports) <= 2 and taken[0] < imports[-1], (note, imports, taken)
    assert time.monotonic() - t0 < 120
