"""The profile tier's ncu session starts outside the profiler lock (``ncu.profile_counters``, ``launch._gate``): the
launch job's Python, torch and the task load first, and the lock is taken only when the job says it is ready, before
its first CUDA call; a job that fails before that never takes the lock. ncu itself is replaced by a script that runs
its target as ncu would (no GPU here: the job then fails at its first CUDA call, after the go). ncu and its target run
inside the job's sandbox, so what they say comes back on the job's output (``_ncu_launch``'s stdout), never as files."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

import pytest

from tritondx.tools.evidence import ncu
from tritondx.tools.exec.sandbox import isolation

AXPY = Path(__file__).parents[1] / "verifier" / "tiny_axpy.py"


def _ncu_script(tmp_path: Path, body: str) -> str:
    """A stand-in for ncu at ``tmp_path/ncu/bin/ncu`` running the shell ``body``."""
    exe = tmp_path / "ncu" / "bin" / "ncu"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def _fake_ncu(tmp_path: Path, before: str = "") -> str:
    """ncu that prints its environment (``before``: more shell lines first), then runs its target: the last five
    arguments, python -m worker JOB RESULT."""
    return _ncu_script(tmp_path, 'env | sed "s/^/NCUENV /"\n' + before + 'shift $(($# - 5))\nexec "$@"\n')


def _marking_task(tmp_path: Path, broken: bool = False) -> Path:
    """A task that says on its output when it was imported."""
    task = tmp_path / "marked_task.py"
    mark = "import time as _t\nprint('IMPORTED', repr(_t.time()), flush=True)\n"
    task.write_text(mark + ("raise ImportError('broken task')\n" if broken else "") + AXPY.read_text())
    return task


def _spy_sessions(monkeypatch) -> list[str]:
    """Every ncu session's output (its stdout, which the job's process shares)."""
    outs: list[str] = []
    real = ncu._ncu_launch

    def spy(*a, **kw):
        r = real(*a, **kw)
        outs.append(r[1] or "")
        return r
    monkeypatch.setattr(ncu, "_ncu_launch", spy)
    return outs


def _imports(outs: list[str]) -> list[float]:
    return [float(ln.split()[1]) for o in outs for ln in o.splitlines() if ln.startswith("IMPORTED ")]


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
    outs = _spy_sessions(monkeypatch)
    task = _marking_task(tmp_path)
    rows, note = ncu.profile_counters(str(task), timeout=300)
    assert rows == [] and note.startswith("ncu gave no counters"), note   # no GPU: the job fails after the go
    imports = _imports(outs)
    assert imports, f"the job never imported the task: {outs}"
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
    outs = _spy_sessions(monkeypatch)
    t0 = time.monotonic()
    task = _marking_task(tmp_path, broken=True)
    rows, note = ncu.profile_counters(str(task), timeout=300)
    imports = _imports(outs)
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
    outs = _spy_sessions(monkeypatch)
    task = _marking_task(tmp_path)
    triton_cache.trusted_dir(task.read_text()).mkdir(parents=True)
    ncu.profile_counters(str(task), timeout=300, original=str(task))
    env = outs[0]
    assert f"NCUENV {triton_cache.TRUSTED_ENV}={triton_cache.trusted_dir(task.read_text())}" in env, env
    assert f"NCUENV TRITON_CACHE_MANAGER={triton_cache.MANAGER}" in env
    other = tmp_path / "candidate.py"
    other.write_text(task.read_text())
    ncu.profile_counters(str(other), timeout=300, original=str(task))
    assert "NCUENV " in outs[-1] and triton_cache.TRUSTED_ENV not in outs[-1]


def test_gate_descriptors_that_do_not_reach_the_job_cost_a_retry_not_the_counters(tmp_path, monkeypatch):
    """A wrapper that does not pass the gate's pipes on (here a stand-in for ncu that closes them): the job ends before
    any CUDA call, the gated attempt takes no lock, and the session runs once more the old way, promptly."""
    from tritondx.tools.evidence.ncu import GATE_ENV

    exe = tmp_path / "ncu"
    exe.write_text('#!/bin/sh\nfds=$(printenv %s | tr , " ")\nfor fd in $fds; do eval "exec $fd>&-"; done\n'
                   'shift $(($# - 5))\nexec "$@"\n' % GATE_ENV)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(ncu, "ncu_path", lambda: str(exe))
    taken = _record_lock(monkeypatch)
    outs = _spy_sessions(monkeypatch)
    task = _marking_task(tmp_path)
    t0 = time.monotonic()
    rows, note = ncu.profile_counters(str(task), timeout=300)
    imports = _imports(outs)
    # the gated job is ended as soon as its ready pipe closes (it may not have imported the task yet); the retry
    # holds the lock from its start
    assert rows == [] and len(taken) == 1 and 1 <= len(imports) <= 2 and taken[0] < imports[-1], (note, imports, taken)
    assert time.monotonic() - t0 < 120


@pytest.mark.skipif(not isolation().readonly, reason="needs the read-only sandbox (bubblewrap or unshare)")
def test_ncu_and_the_profiled_candidate_run_inside_the_sandbox(tmp_path, monkeypatch):
    """The profile tier profiles the best candidate so far: untrusted code. ncu and the process it profiles run inside
    the job's sandbox: the candidate reads its own folder but writes nothing there, nor the task's trusted Triton cache
    layer, nor the run's folders; its scratch folder goes with the job. (Before, ncu was started by the orchestrator
    itself and the candidate could write whatever the orchestrator could.)"""
    from tritondx.tools.exec import triton_cache

    cache_root = tmp_path / "cache"
    monkeypatch.setenv("TRITONDX_CACHE", str(cache_root))
    monkeypatch.setattr(ncu, "ncu_path", lambda: _fake_ncu(tmp_path))
    _record_lock(monkeypatch)
    outs = _spy_sessions(monkeypatch)
    original = _marking_task(tmp_path)
    layer = triton_cache.trusted_dir(original.read_text())
    layer.mkdir(parents=True)
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    targets = [tmp_path / "cand" / "planted.txt", layer / "planted.txt", run_dir / "planted.txt",
               Path.home() / f"tritondx-planted-{tmp_path.name}-{os.getpid()}.txt"]
    cand = tmp_path / "cand" / "candidate.py"
    cand.parent.mkdir()
    attempts = "".join(
        f"try:\n    open({str(t)!r}, 'w').write('x')\n    print('WROTE', {str(t)!r}, flush=True)\n"
        f"except OSError as _e:\n    print('DENIED', {str(t)!r}, type(_e).__name__, flush=True)\n" for t in targets)
    cand.write_text(attempts + "open('scratch_file', 'w').write('x')\nprint('SCRATCH OK', flush=True)\n"
                    + AXPY.read_text())
    try:
        rows, note = ncu.profile_counters(str(cand), timeout=300, original=str(original))
    finally:
        written = [t for t in targets if t.exists()]
        for t in written:
            t.unlink()
    out = "\n".join(outs)
    assert "SCRATCH OK" in out and "NCUENV " in out, out[-2000:]   # ncu and the candidate ran
    assert not written, f"the candidate under ncu wrote {written}"
    for t in targets:
        assert f"DENIED {t}" in out, out[-2000:]
    assert "WROTE" not in out
    assert not list(tmp_path.glob("**/scratch_file")) and not list(Path("/tmp").glob("tritondx-job-*/scratch_file"))


def test_a_session_reports_the_device_and_profiler_seconds_it_held(tmp_path, monkeypatch):
    """The profile tier's ncu session is device time (the launch job holds the device lock while ncu replays): the
    job's own ``device_usage`` comes back as ``device_seconds`` (the run's device seconds add it), and the profiler
    lock's hold as ``profiler_seconds``. Here a stand-in for ncu writes the job's result as a worker would."""
    exe = _ncu_script(tmp_path, 'for a; do last=$a; done\nsleep 0.3\n'
                           'echo \'{"ok": true, "device_usage": {"shared_s": 0.25, "exclusive_s": 1.5}}\' > "$last"\n')
    monkeypatch.setattr(ncu, "ncu_path", lambda: exe)
    _record_lock(monkeypatch)
    s = ncu.profile_session(str(_marking_task(tmp_path)), timeout=120)
    # no CSV from the stand-in: the gated session and its retry, each with the job's 1.75 s
    assert s.rows == [] and s.device_seconds == 3.5, s
    assert s.profiler_seconds >= 0.3, s


def test_an_autotuned_task_is_prewarmed_outside_the_lock_and_its_session_starts_from_that_cache(tmp_path, monkeypatch):
    """An autotuned launcher's first call under ncu benchmarks every config with the profiler lock held (45.8 s for one
    task in the corpus batch of 2026-12-03): a plain launch job of the same source (``ncu._prewarm``, faked here: no
    GPU) runs it first into a cache folder of its own, which the session under ncu then gets as its Triton cache with
    autotuning results read from it; the folder is gone after the session. A task that does not autotune gets none."""
    from tritondx.tools.exec import sandbox
    from tritondx.tools.exec.sandbox import JobResult
    exe = _fake_ncu(tmp_path, before='ls "$TRITON_CACHE_DIR" | sed "s/^/CACHED /"\n')
    monkeypatch.setattr(ncu, "ncu_path", lambda: exe)
    monkeypatch.delenv(ncu.PREWARM_ENV, raising=False)
    taken = _record_lock(monkeypatch)
    outs = _spy_sessions(monkeypatch)
    prewarms: list[tuple[dict, dict, Path]] = []

    def run_job(job, timeout=300.0, env=None, gpu_lock=False, cache_dir=None, **kw):
        assert not taken, "the prewarm job ran under the profiler lock"
        (Path(cache_dir) / "compiled_and_autotuned.json").write_text("{}")
        prewarms.append((job, dict(env or {}), Path(cache_dir)))
        return JobResult(kind="ok", returncode=0, seconds=1.0, result={"device_usage": {}})
    monkeypatch.setattr(sandbox, "run_job", run_job)
    task = tmp_path / "tuned_task.py"
    task.write_text("# @triton.autotune(configs=[...], key=['n']) on its kernel\n" + AXPY.read_text())
    session = ncu.profile_session(str(task), timeout=300)
    assert len(prewarms) == 1, prewarms
    job, env, folder = prewarms[0]
    assert job["kind"] == "launch" and job["task"] == str(task.resolve()) and "profile_last" not in job
    assert env.get("TRITON_CACHE_AUTOTUNING") == "1"
    assert f"NCUENV TRITON_CACHE_DIR={folder}" in outs[0] and "NCUENV TRITON_CACHE_AUTOTUNING=1" in outs[0], outs[0]
    assert "CACHED compiled_and_autotuned.json" in outs[0]
    assert not folder.exists() and "prewarm_s" in session.steps
    plain = _marking_task(tmp_path)
    ncu.profile_session(str(plain), timeout=300)
    assert len(prewarms) == 1 and "NCUENV TRITON_CACHE_AUTOTUNING" not in outs[-1]
