"""The device lock as jobs take it: descriptors handed over by the orchestrator, phases inside jobs.

Each child process records when it held the lock; exclusive intervals must not overlap any other
interval, shared ones may overlap each other, and a queued timer is not starved by later shared
holders (the turnstile)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tritondx.tools.exec import gpulock

CHILD = """
import sys, time
from tritondx.tools.exec.gpulock import phase
mode, hold, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
with phase(mode):
    t0 = time.time()
    time.sleep(hold)
    t1 = time.time()
open(log, "a").write(f"{mode} {t0} {t1}\\n")
"""


def _start(mode: str, hold: float, log, env):
    with gpulock.job_lock_fds() as (fds, lock_env):
        assert len(fds) == 3 and gpulock.JOB_LOCK_ENV in lock_env
        return subprocess.Popen([sys.executable, "-c", CHILD, mode, str(hold), str(log)],
                                env={**env, **lock_env}, pass_fds=fds)


def _intervals(log):
    return [(m, float(a), float(b)) for m, a, b in (ln.split() for ln in log.read_text().splitlines())]


@pytest.fixture
def env(tmp_path, monkeypatch):
    import os
    monkeypatch.setenv("TRITONDX_LOCK_DIR", str(tmp_path / "locks"))
    return dict(os.environ)


def test_exclusive_never_overlaps_shared(tmp_path, env):
    log = tmp_path / "log"
    procs = [_start("shared", 0.6, log, env), _start("shared", 0.6, log, env)]
    time.sleep(0.2)
    procs.append(_start("exclusive", 0.4, log, env))
    time.sleep(0.2)
    procs.append(_start("shared", 0.3, log, env))  # arrives after the timer queued: must wait behind it
    for p in procs:
        assert p.wait(timeout=30) == 0
    iv = _intervals(log)
    assert len(iv) == 4
    ex = [x for x in iv if x[0] == "exclusive"][0]
    for other in iv:
        if other is ex:
            continue
        assert other[2] <= ex[1] + 0.01 or other[1] >= ex[2] - 0.01, f"overlap: {other} with {ex}"
    shared = sorted(x for x in iv if x[0] == "shared")
    first_two = [x for x in shared if x[1] < ex[1]]
    assert len(first_two) == 2 and first_two[0][1] < first_two[1][2], "shared holders should overlap"
    late = [x for x in shared if x[1] >= ex[2] - 0.01]
    assert len(late) == 1, "the shared holder that came after the queued timer should run after it"


def test_no_lock_dir_is_a_noop(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITONDX_LOCK_DIR", raising=False)
    monkeypatch.delenv(gpulock.JOB_LOCK_ENV, raising=False)
    with gpulock.job_lock_fds() as (fds, lock_env):
        assert fds == () and lock_env == {}
    with gpulock.phase("exclusive"):
        pass


def test_run_job_passes_the_lock_to_the_job(tmp_path, monkeypatch):
    """run_job(gpu_lock=True) hands the job its descriptors: a probe job that takes a shared phase
    waits while the orchestrator holds the device exclusively."""
    from tritondx.tools.exec.sandbox import run_job
    monkeypatch.setenv("TRITONDX_LOCK_DIR", str(tmp_path / "locks"))
    task = tmp_path / "t.py"
    task.write_text((__import__("pathlib").Path(__file__).parents[3] / "examples" / "add_tiny_block.py").read_text())
    import threading
    out = {}

    def job():
        t0 = time.monotonic()
        out["r"] = run_job({"kind": "probe", "task": str(task), "device": "cpu"}, timeout=120,
                           env={"TRITON_INTERPRET": "1"}, gpu_lock=True)
        out["t"] = time.monotonic() - t0

    job()  # unlocked: how long the job takes by itself
    assert out["r"].ok and out["r"].result.get("ok"), out["r"]
    alone = out["t"]
    with gpulock.job_lock_fds() as (_, lock_env):  # this process holds the device alone, as a timer would
        monkeypatch.setenv(gpulock.JOB_LOCK_ENV, lock_env[gpulock.JOB_LOCK_ENV])
        with gpulock.phase("exclusive"):
            monkeypatch.delenv(gpulock.JOB_LOCK_ENV)  # the job gets its own descriptors from run_job
            th = threading.Thread(target=job)
            th.start()
            time.sleep(alone + 4.0)
            assert th.is_alive(), f"the job finished while the device was held exclusively (alone: {alone:.1f} s)"
    th.join(timeout=120)
    assert out["r"].ok and out["r"].result.get("ok"), out["r"]


def test_a_job_retried_alone_takes_every_phase_exclusively(tmp_path, env):
    """After a CUDA out-of-memory the verifier retries the job with TRITONDX_JOB_ALONE=1: its shared
    phases then exclude every other job (the memory was perhaps theirs)."""
    log = tmp_path / "log"
    first = _start("shared", 0.8, log, env)
    time.sleep(0.2)
    alone = _start("shared", 0.4, log, {**env, gpulock.JOB_ALONE_ENV: "1"})
    for p in (first, alone):
        assert p.wait(timeout=30) == 0
    (a0, a1), (b0, b1) = sorted((float(x[1]), float(x[2])) for x in _intervals(log))
    assert b0 >= a1 - 0.01, "the job retried alone overlapped another job's device work"


def test_a_job_started_by_another_program_opens_the_folder_itself(tmp_path, env):
    """ncu starts the launch job: it gets the lock folder's path (TRITONDX_JOB_LOCK_DIR), not descriptors,
    and its exclusive phase still excludes a job holding the device shared."""
    log = tmp_path / "log"
    first = _start("shared", 0.8, log, env)
    time.sleep(0.2)
    by_path = subprocess.Popen([sys.executable, "-c", CHILD, "exclusive", "0.3", str(log)],
                               env={**env, gpulock.JOB_LOCK_DIR_ENV: env["TRITONDX_LOCK_DIR"]})
    for p in (first, by_path):
        assert p.wait(timeout=30) == 0
    (m0, a0, a1), (m1, b0, b1) = sorted(((x[0], float(x[1]), float(x[2])) for x in _intervals(log)),
                                        key=lambda x: x[1])
    assert (m0, m1) == ("shared", "exclusive") and b0 >= a1 - 0.01, _intervals(log)


def test_a_bench_that_runs_out_of_device_memory_in_a_batch_is_retried_alone(tmp_path, monkeypatch):
    """On a shared device (a lock folder set) a bench job's CUDA OOM is retried once with the device
    alone; the second answer is the result. Without a lock folder (the device is not shared) it is not."""
    from tritondx.tools.verify import timing
    from tritondx.tools.exec.sandbox import JobResult
    from tritondx.tools.exec import jobs
    calls = []

    def fake_run_job(job, timeout, env, gpu_lock=False, **kw):
        calls.append(dict(env))
        if len(calls) == 1:  # answered, as the worker does: an OOM class and the time it held the device
            return JobResult(kind="ok", returncode=0, seconds=1.0,
                             result={"passed": False, "class": "out_of_memory", "error": "CUDA out of memory",
                                     "device_usage": {"shared_s": 0.5, "exclusive_s": 0.0, "wait_s": 3.0}})
        return JobResult(kind="ok", returncode=0, seconds=2.0,
                         result={"shapes": [], "device_usage": {"shared_s": 0.25, "exclusive_s": 1.0, "wait_s": 0}})

    class Cuda:
        name, can_time = "cuda", True

        def job_env(self):
            return {"X": "1"}

    monkeypatch.setattr(jobs, "run_job", fake_run_job)
    monkeypatch.setenv("TRITONDX_LOCK_DIR", str(tmp_path))
    task = tmp_path / "t.py"   # the bench reads the task's source (its trusted Triton cache layer)
    task.write_text("")
    monkeypatch.chdir(tmp_path)
    result, error, seconds = timing.bench_variants("t.py", [{"id": "initial", "path": "t.py"}], Cuda())
    assert result["shapes"] == [] and error == "" and seconds == 3.0
    assert result["device_seconds"] == 1.75  # both attempts held the device; waits are not counted
    assert gpulock.JOB_ALONE_ENV not in calls[0] and calls[1][gpulock.JOB_ALONE_ENV] == "1"

    calls.clear()
    monkeypatch.delenv("TRITONDX_LOCK_DIR")
    result, error, _ = timing.bench_variants("t.py", [{"id": "initial", "path": "t.py"}], Cuda())
    assert result is None and error.startswith("out_of_memory") and len(calls) == 1


def test_phase_counts_time_held_and_time_waited(tmp_path, env):
    """``usage()`` separates the seconds a process held the device from the seconds it waited for it:
    the cost a task's jobs put on the device, whatever the load of the batch around them."""
    import os

    def delta(before):
        now = gpulock.usage()
        return {k: now[k] - before[k] for k in now}

    before = gpulock.usage()
    with gpulock.phase("shared"):  # no lock handed over: only counted
        time.sleep(0.2)
    u = delta(before)
    assert 0.2 <= u["shared_s"] < 1.0 and u["exclusive_s"] == 0 and u["wait_s"] == 0, u
    blocker = _start("exclusive", 1.0, tmp_path / "log", env)
    time.sleep(0.4)  # the child holds the device exclusively now
    before = gpulock.usage()
    with gpulock.job_lock_fds() as (_, lock_env):
        os.environ.update(lock_env)
        try:
            with gpulock.phase("exclusive"):
                time.sleep(0.2)
        finally:
            for k in lock_env:
                os.environ.pop(k)
    blocker.wait(10)
    u = delta(before)
    assert u["wait_s"] >= 0.3, u
    assert 0.2 <= u["exclusive_s"] < 0.6 and u["shared_s"] == 0, u


def test_a_verify_job_reports_the_seconds_it_held_the_device():
    """End to end: the job's answer carries ``device_usage`` and the verification ``device_s``, part of
    the job's wall seconds (the rest is start-up, imports and compiles)."""
    from pathlib import Path
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    here = Path(__file__).resolve().parents[1] / "verifier"
    v = verify_candidate(str(here / "tiny_axpy.py"), str(here.parents[2] / "examples" / "add_tiny_block.py"),
                         "honest", get_backend("interpreter"))
    assert v.passed, v.reason
    assert 0 < v.device_s < v.seconds, (v.device_s, v.seconds)


THREADS_CHILD = """
import sys, threading, time
from tritondx.tools.exec.gpulock import phase, usage
log, stop_at = sys.argv[1], time.time() + float(sys.argv[2])
lines = []

def worker(k):
    # overlapping shared holds, one after another, until stop_at: alone they would hold the device throughout
    while time.time() < stop_at:
        with phase("shared"):
            t0 = time.time()
            time.sleep(0.15)
            lines.append(f"shared{k} {t0} {time.time()}")
        time.sleep(0.01)

ts = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
open(log, "a").write("\\n".join(lines) + "\\n")
print(usage()["shared_s"])
"""


def test_threads_of_one_job_share_one_hold_and_a_timer_still_gets_its_turn(tmp_path, env):
    """Three threads of one job keep overlapping shared holds for 2.5 s (never all out at once); a timer
    that queues meanwhile gets the device before they are done, and never while one of them holds it.
    The job's shared seconds count the hold once, not once per thread."""
    log = tmp_path / "log"
    with gpulock.job_lock_fds() as (fds, lock_env):
        job = subprocess.Popen([sys.executable, "-c", THREADS_CHILD, str(log), "2.5"], env={**env, **lock_env},
                               pass_fds=fds, stdout=subprocess.PIPE, text=True)
    time.sleep(0.6)
    timer = _start("exclusive", 0.3, log, env)
    assert timer.wait(timeout=30) == 0
    out, _ = job.communicate(timeout=30)
    assert job.returncode == 0
    iv = _intervals(log)
    ex = [x for x in iv if x[0] == "exclusive"][0]
    shared = [x for x in iv if x[0] != "exclusive"]
    assert ex[2] < max(b for _, _, b in shared) - 0.5, "the timer waited for the threads to finish"
    for _, a, b in shared:
        assert b <= ex[1] + 1e-3 or a >= ex[2] - 1e-3, (ex, (a, b))
    held = float(out.strip().splitlines()[-1])
    assert held < 2.9, f"shared seconds counted per thread: {held}"


PROFILER_CHILD = """
import sys, time
from tritondx.tools.exec.gpulock import profiler
hold, log = float(sys.argv[1]), sys.argv[2]
with profiler():
    t0 = time.time()
    time.sleep(hold)
    t1 = time.time()
open(log, "a").write(f"profiler {t0} {t1}\\n")
"""


def test_one_ncu_session_at_a_time_jobs_and_the_orchestrator_alike(tmp_path, env, monkeypatch):
    """The profiler lock (held for a process's whole life under ncu): two jobs with handed-over
    descriptors and this process (the orchestrator, which opens the lock folder itself) never hold it at
    once, though none of them holds a device phase."""
    log = tmp_path / "log"
    procs = []
    for _ in range(2):
        with gpulock.job_lock_fds() as (fds, lock_env):
            procs.append(subprocess.Popen([sys.executable, "-c", PROFILER_CHILD, "0.5", str(log)],
                                          env={**env, **lock_env}, pass_fds=fds))
    time.sleep(0.1)
    monkeypatch.delenv(gpulock.JOB_LOCK_ENV, raising=False)
    with gpulock.profiler():
        t0 = time.time()
        time.sleep(0.3)
        log.open("a").write(f"profiler {t0} {time.time()}\n")
    for p in procs:
        assert p.wait(timeout=30) == 0
    iv = sorted(_intervals(log), key=lambda x: x[1])
    assert len(iv) == 3
    for (_, _, end), (_, start, _) in zip(iv, iv[1:]):
        assert end <= start + 1e-3, iv


PRIORITY_CHILD = """
import sys, time
from tritondx.tools.exec.gpulock import profiler
hold, log, who = float(sys.argv[1]), sys.argv[2], sys.argv[3]
with profiler(urgent=not who.startswith("speculative")):
    t0 = time.time()
    time.sleep(hold)
    t1 = time.time()
open(log, "a").write(f"{who} {t0} {t1}\\n")
"""


def test_an_urgent_ncu_session_goes_before_speculative_ones_that_waited_longer(tmp_path, env):
    """While one session profiles, three speculative sessions (the initial kernel's hardware check started in
    triage) queue, then an urgent one (a profile tier the run waits on): the urgent one is next, the speculative
    ones follow one at a time, and no two ever hold the profiler at once. Repeated: with a plain flock the urgent
    one is next about one time in four."""
    for attempt in range(3):
        log = tmp_path / f"log{attempt}"
        procs = []

        def start(who: str, hold: float) -> None:
            with gpulock.job_lock_fds() as (fds, lock_env):
                procs.append(subprocess.Popen([sys.executable, "-c", PRIORITY_CHILD, str(hold), str(log), who],
                                              env={**env, **lock_env}, pass_fds=fds))

        start("holder", 1.5)
        time.sleep(0.7)   # the holder holds it
        for k in range(3):
            start(f"speculative{k}", 0.2)
        time.sleep(0.5)   # they wait
        start("urgent", 0.2)
        for p in procs:
            assert p.wait(timeout=60) == 0
        iv = sorted(_intervals(log), key=lambda x: x[1])
        assert [who for who, _, _ in iv][:2] == ["holder", "urgent"], iv
        assert sorted(who for who, _, _ in iv[2:]) == ["speculative0", "speculative1", "speculative2"]
        for (_, _, end), (_, begin, _) in zip(iv, iv[1:]):
            assert end <= begin + 1e-3, iv


URGENT_CHILD = """
import sys, time
from tritondx.tools.exec.gpulock import phase
mode, hold, log, who = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
with (phase("shared", urgent=True) if mode == "urgent" else phase(mode)):
    t0 = time.time()
    time.sleep(hold)
    t1 = time.time()
open(log, "a").write(f"{who} {t0} {t1}\\n")
"""


def test_an_urgent_shared_hold_goes_past_a_queued_timer_which_still_never_overlaps_it(tmp_path, env):
    """A shared holder holds the device; a timer queues for it; then an urgent shared hold (the hardware check's
    calls under ncu, holding the profiler lock) and a plain one ask. The urgent one starts at once, beside the first
    holder; the plain one waits behind the timer; the timer starts only after both shared holds before it ended."""
    log = tmp_path / "log"
    procs = []

    def start(mode: str, hold: float, who: str) -> None:
        with gpulock.job_lock_fds() as (fds, lock_env):
            procs.append(subprocess.Popen([sys.executable, "-c", URGENT_CHILD, mode, str(hold), str(log), who],
                                          env={**env, **lock_env}, pass_fds=fds))

    start("shared", 1.5, "first")
    time.sleep(0.8)
    start("exclusive", 0.3, "timer")
    time.sleep(0.4)
    start("urgent", 0.5, "urgent")
    start("shared", 0.3, "plain")
    for p in procs:
        assert p.wait(timeout=60) == 0
    iv = {who: (a, b) for who, a, b in _intervals(log)}
    assert iv["urgent"][0] < iv["first"][1]               # beside the first holder, not behind the timer
    assert iv["timer"][0] >= max(iv["first"][1], iv["urgent"][1]) - 1e-3
    assert iv["plain"][0] >= iv["timer"][1] - 1e-3          # a plain shared hold waits behind the timer


ASIDE_CHILD = """
import sys, time
from tritondx.tools.exec import gpulock
work_s, log = float(sys.argv[1]), sys.argv[2]

def compile(*args):      # stands in for Triton's compile: CPU only, ``work_s`` long
    time.sleep(work_s)
    return "binary"

compile = gpulock.compile_aside(compile)
with gpulock.phase("shared"):
    t0 = time.time()
    time.sleep(0.2)                  # device work before the compile
    a = time.time()
    compile()
    b = time.time()
    time.sleep(0.2)                  # the first launch and the checks after it
    t1 = time.time()
u = gpulock.usage()
open(log, "a").write(f"shared {t0} {t1} {a} {b} {u['aside_s']}\\n")
"""


def _start_aside(work_s: float, log, env):
    with gpulock.job_lock_fds() as (fds, lock_env):
        return subprocess.Popen([sys.executable, "-c", ASIDE_CHILD, str(work_s), str(log)],
                                env={**env, **lock_env}, pass_fds=fds)


def test_a_long_compile_in_a_shared_phase_lets_a_queued_timer_in_and_the_hold_never_overlaps_it(tmp_path, env):
    """A shared holder whose compile runs 1.5 s gives the device back after ``ASIDE_AFTER_S``: a timer that queued
    meanwhile runs during the compile, and the holder's device work before and after it never overlaps the timer.
    Without the step aside the timer would start only after the whole 1.9 s hold."""
    log = tmp_path / "log"
    holder = _start_aside(1.5, log, env)
    time.sleep(1.0)  # the child is in its phase (python start ~0.3 s, 0.2 s of device work, then the compile)
    timer = _start("exclusive", 0.3, log, env)
    assert holder.wait(timeout=30) == 0 and timer.wait(timeout=30) == 0
    rows = [ln.split() for ln in log.read_text().splitlines()]
    ex = next((float(r[1]), float(r[2])) for r in rows if r[0] == "exclusive")
    sh = next([float(x) for x in r[1:]] for r in rows if r[0] == "shared")
    t0, t1, a, b, aside_s = sh
    assert a + gpulock.ASIDE_AFTER_S - 0.05 <= ex[0] < b, f"the timer ran at {ex}, not during the compile {a, b}"
    assert ex[1] <= b + 0.05 or ex[0] >= t1, "the holder's device work after the compile overlapped the timer"
    assert ex[0] >= t0 + 0.2 - 0.01, "the holder's device work before the compile overlapped the timer"
    assert 0.9 < aside_s < 1.6


def test_a_short_compile_keeps_the_hold(tmp_path, env):
    """A compile shorter than ``ASIDE_AFTER_S`` (a cache hit) does not give the device back."""
    log = tmp_path / "log"
    holder = _start_aside(0.02, log, env)
    assert holder.wait(timeout=30) == 0
    row = log.read_text().split()
    assert float(row[-1]) == 0.0


def test_step_aside_outside_a_phase_is_a_noop_and_step_back_without_aside_too(tmp_path, env, monkeypatch):
    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, env["TRITONDX_LOCK_DIR"])
    monkeypatch.setattr(gpulock, "_OPENED", None)
    assert gpulock.step_aside() is False
    gpulock.step_back()
    with gpulock.phase("exclusive"):
        hold = gpulock.current_hold()
        assert hold is not None and hold.mode == "exclusive"
        assert gpulock.step_aside() is True and gpulock.step_aside() is False
        gpulock.step_back()
        assert not hold.aside
        assert gpulock.step_aside() is True   # left aside: the phase's end releases nothing twice
    assert gpulock.current_hold() is None
    with gpulock.phase("exclusive"):     # and the lock is free again
        pass


def _other_fd(env):
    import os
    return os.open(f"{env['TRITONDX_LOCK_DIR']}/gpu.lock", os.O_RDWR | os.O_CREAT, 0o600)


def _can(fd: int, kind: int) -> bool:
    import fcntl
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def test_an_upgraded_shared_hold_is_exclusive_until_it_is_turned_back(tmp_path, env, monkeypatch):
    """``upgrade`` inside a shared phase: no other job may hold the device, even shared; ``downgrade``: others may
    hold it shared again, not exclusively; a phase left while upgraded gives everything back."""
    import fcntl
    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, env["TRITONDX_LOCK_DIR"])
    monkeypatch.setattr(gpulock, "_OPENED", None)
    assert gpulock.upgrade() is False          # outside a phase: nothing to turn
    other = _other_fd(env)
    with gpulock.phase("shared"):
        assert _can(other, fcntl.LOCK_SH) and not _can(other, fcntl.LOCK_EX)
        assert gpulock.upgrade() is True and gpulock.upgrade() is False
        assert gpulock.current_hold().mode == "exclusive"
        assert not _can(other, fcntl.LOCK_SH)
        gpulock.downgrade()
        assert gpulock.current_hold().mode == "shared"
        assert _can(other, fcntl.LOCK_SH) and not _can(other, fcntl.LOCK_EX)
        gpulock.downgrade()                     # not turned: a no-op
        assert gpulock.upgrade() is True        # left turned: the phase's end gives it back
    assert gpulock.current_hold() is None and _can(other, fcntl.LOCK_EX)
    before = gpulock.usage()["exclusive_s"]
    with gpulock.phase("exclusive"):
        assert gpulock.upgrade() is False       # already exclusive
        time.sleep(0.01)                        # usage() rounds to 0.1 ms: hold long enough to be counted
    assert gpulock.usage()["exclusive_s"] >= before + 0.009


def test_autotuners_time_their_configs_alone_inside_a_shared_warm_up(tmp_path, env, monkeypatch):
    """``autotune_exclusive``: Triton's ``Autotuner._bench`` (one config's timing) runs with the device held
    exclusively, the rest of the autotuner's ``run`` turns back to shared when it returns, and the class is itself
    again after the block (no timed call goes through the wrapper)."""
    import fcntl
    from triton.runtime.autotuner import Autotuner
    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, env["TRITONDX_LOCK_DIR"])
    monkeypatch.setattr(gpulock, "_OPENED", None)
    other = _other_fd(env)
    seen: list[tuple[str, bool]] = []

    def fake_bench(self, *args, config=None, **kwargs):   # stands for timing one config on the device
        seen.append((gpulock.current_hold().mode, _can(other, fcntl.LOCK_SH)))
        return 1.0

    def fake_run(self, *args, **kwargs):                  # a cache miss: every config timed, then the call
        for c in ("a", "b"):
            self._bench(config=c)
        seen.append(("call", gpulock.current_hold().mode == "exclusive"))
        return "ran"

    monkeypatch.setattr(Autotuner, "_bench", fake_bench)
    monkeypatch.setattr(Autotuner, "run", fake_run)
    tuner = object.__new__(Autotuner)
    with gpulock.autotune_exclusive() as took, gpulock.phase("shared"):
        assert took is True
        assert tuner.run() == "ran"
        assert gpulock.current_hold().mode == "shared" and _can(other, fcntl.LOCK_SH)
    assert seen == [("exclusive", False), ("exclusive", False), ("call", True)]
    assert Autotuner._bench is fake_bench and Autotuner.run is fake_run
    with gpulock.autotune_exclusive(False) as took:
        assert took is False and Autotuner._bench is fake_bench


@pytest.mark.parametrize("exclusive", [True, False])
def test_an_autotuner_compiles_every_config_in_threads_with_the_device_given_back_before_timing_any(
        tmp_path, env, monkeypatch, exclusive):
    """``autotune_exclusive``: where the key is new (``prune_configs`` ran), every config the autotuner will time is
    compiled first, each a warm-up launch (``warmup=True``) with the call's arguments, on threads other than the
    caller's and with the caller's device hold given back (another job could take the device meanwhile); only then
    is the first config timed: alone, or (``exclusive=False``: the probe's checked shapes, whose picks serve nothing)
    in the hold the caller has. A pick read from the disk cache (no config timed) compiles nothing."""
    import fcntl
    import threading
    from triton.runtime.autotuner import Autotuner
    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, env["TRITONDX_LOCK_DIR"])
    monkeypatch.setattr(gpulock, "_OPENED", None)
    other = _other_fd(env)
    events: list = []
    caller = threading.get_ident()

    class Cfg:
        def __init__(self, block):
            self.block = block

        def all_kwargs(self):
            return {"BLOCK": self.block, "num_warps": 4}

    class Fn:   # Triton's JITFunction.run: a keyword the kernel does not take is an error
        def run(self, *args, grid, warmup, BLOCK, num_warps):
            events.append(("compile", args, BLOCK, warmup, grid, threading.get_ident() != caller,
                           _can(other, fcntl.LOCK_EX)))

    def fake_bench(self, *args, config=None, **kwargs):
        events.append(("time", config.block, gpulock.current_hold().mode))
        return float(config.block)

    def fake_run(self, *args, **kwargs):     # Triton's run: prune where the key is new, then time each config
        if kwargs.pop("cached", False):
            self.prune_configs(kwargs)       # the disk cache had the pick: nothing timed
            return "cached"
        for c in self.prune_configs(kwargs):
            self._bench(*args, config=c, **kwargs)
        return "ran"

    fake_prune = lambda self, kwargs: list(self.configs)   # noqa: E731
    monkeypatch.setattr(Autotuner, "_bench", fake_bench)
    monkeypatch.setattr(Autotuner, "run", fake_run)
    monkeypatch.setattr(Autotuner, "prune_configs", fake_prune)
    tuner = object.__new__(Autotuner)
    tuner.configs, tuner.fn = [Cfg(64), Cfg(128), Cfg(256)], Fn()
    mode = "exclusive" if exclusive else "shared"
    with gpulock.autotune_exclusive(exclusive=exclusive), gpulock.phase("shared"):
        assert tuner.run("x", grid=(4,), warmup=False) == "ran"
        compiles, timings = events[:3], events[3:]
        assert sorted(e[2] for e in compiles) == [64, 128, 256]
        assert all(e[1] == ("x",) and e[3] is True and e[4] == (4,) for e in compiles)
        assert all(e[5] for e in compiles), "compiled on the caller's thread"
        assert all(e[6] for e in compiles), "the device was held while the configs compiled"
        assert timings == [("time", 64, mode), ("time", 128, mode), ("time", 256, mode)]
        events.clear()
        assert tuner.run("x", grid=(4,), warmup=False, cached=True) == "cached"
        assert events == [] and "_tritondx_to_compile" not in tuner.__dict__
    assert Autotuner.prune_configs is fake_prune
