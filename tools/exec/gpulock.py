"""Exclusive device time for timing while several tasks run at once (batch workers).

Device work takes the lock shared; timing takes it exclusive, so no other kernel runs on the GPU
while a measurement is taken. A turnstile keeps a stream of shared holders from starving the timer.
Without ``TRITONDX_LOCK_DIR`` (single runs) everything here is a no-op.

A third lock, the profiler's (``profiler``), is held for the whole life of a process under Nsight Compute:
the driver gives its performance counters to one profiling session at a time, and a second ncu process
starting while one profiles failed both ("Profiling failed because a driver resource was unavailable",
H200, 2026-12-01: 9 of 19 hardware checks in three batches, before and after the hardware check started
its two runners at once).

The lock is held *inside* the jobs, around the parts that touch the device, not around whole jobs:
a job spends most of its life starting Python, importing torch and compiling, and holding the lock
through that made every measurement wait for the slowest verification to finish (batch wall time
was mostly lock waits). The orchestrator opens the two lock files afresh for each job and hands the
descriptors over (``job_lock_fds``); the job takes them in ``phase("shared")`` /
``phase("exclusive")``. A job that another program starts (the launch job under Nsight Compute)
gets the folder's path instead and opens the files itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path

JOB_LOCK_ENV = "TRITONDX_JOB_GPU_LOCK"  # "<turnstile fd>,<gpu fd>,<profiler fd>" in a job's environment
JOB_ALONE_ENV = "TRITONDX_JOB_ALONE"    # "1": every phase of the job is exclusive (a retry after a CUDA OOM)
JOB_LOCK_DIR_ENV = "TRITONDX_JOB_LOCK_DIR"  # a job started through another program (ncu): the folder itself
_OPENED: tuple[int, int] | None = None
# This process's device time: seconds inside shared / exclusive phases, seconds spent waiting to enter
# them, and seconds a phase gave the device back (``step_aside``: Triton compiles, a case's bytes on the
# pipe). A job's wall time is mostly Python start-up, imports and compiles, and under a busy batch also
# these waits; what it held the device for is the cost that compares across loads.
_USAGE = {"shared_s": 0.0, "exclusive_s": 0.0, "wait_s": 0.0, "aside_s": 0.0}


def usage() -> dict[str, float]:
    """Seconds this process held the device (``shared_s``, ``exclusive_s``) and waited for it (``wait_s``)."""
    return {k: round(v, 4) for k, v in _USAGE.items()}


def held_seconds(u: dict | None) -> float:
    """Seconds a job held the device, from its ``device_usage`` (0 when it reported none)."""
    return float((u or {}).get("shared_s", 0.0)) + float((u or {}).get("exclusive_s", 0.0))


def _lock_dir() -> Path | None:
    d = os.environ.get("TRITONDX_LOCK_DIR")
    if not d:
        return None
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def _acquire(turnstile: int, gpu: int, mode: str) -> None:
    if mode == "shared_urgent":   # past the turnstile: a queued timer waits for this hold too
        fcntl.flock(gpu, fcntl.LOCK_SH)
    elif mode == "exclusive":
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(gpu, fcntl.LOCK_EX)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    else:  # pass through the turnstile: wait behind a timer that is already queued
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(gpu, fcntl.LOCK_SH)


def _open_pair(d: Path) -> tuple[int, int]:
    """Fresh descriptors (own open file descriptions) of the turnstile and the device lock in ``d``."""
    return (os.open(d / "turnstile.lock", os.O_RDWR | os.O_CREAT, 0o600),
            os.open(d / "gpu.lock", os.O_RDWR | os.O_CREAT, 0o600))


def _open_profiler(d: Path) -> int:
    return os.open(d / "profiler.lock", os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def job_lock_fds():
    """Orchestrator side: fresh descriptors of the lock files for one job (its own open file
    descriptions, so two jobs never share a lock). Yields (fds to pass, env to add); empty when
    there is no lock directory."""
    d = _lock_dir()
    if d is None:
        yield (), {}
        return
    t, g = _open_pair(d)
    p = _open_profiler(d)
    try:
        yield (t, g, p), {JOB_LOCK_ENV: f"{t},{g},{p}"}
    finally:
        os.close(t)
        os.close(g)
        os.close(p)


def _job_fds() -> tuple[int, int] | None:
    """The job's lock descriptors: handed over by the orchestrator, or (for a job that a profiler
    such as ncu starts, which need not pass descriptors on) opened once from the folder's path."""
    global _OPENED
    spec = os.environ.get(JOB_LOCK_ENV, "")
    try:
        t, g = (int(x) for x in spec.split(",")[:2])
        return t, g
    except ValueError:
        pass
    d = os.environ.get(JOB_LOCK_DIR_ENV)
    if not d:
        return None
    if _OPENED is None:
        _OPENED = _open_pair(Path(d))
    return _OPENED


# Shared holds of this process's threads (a judge checking candidates side by side): one flock for all of
# them, taken by the first and given back by the last, and counted once in ``usage``.
_SHARED_CV = threading.Condition()
_SHARED = {"n": 0, "since": 0.0}


def _turnstile_open(turnstile: int) -> bool:
    """No timer is queued: nobody holds the turnstile (a timer holds it while it waits for the device)."""
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    fcntl.flock(turnstile, fcntl.LOCK_UN)
    return True


class _Hold:
    """This thread's device hold inside ``phase``: its mode, the lock descriptors, and whether it stepped aside
    (``step_aside``: given back for a block that uses no device, a Triton compile)."""

    def __init__(self, mode: str, fds: tuple[int, int] | None) -> None:
        self.mode = mode            # "shared", "shared_urgent" or "exclusive"
        self.fds = fds
        self.aside = False
        self.since = time.monotonic()
        self.lock = threading.Lock()   # step_aside may come from another thread (``compile_aside``)


_THREAD = threading.local()


def current_hold() -> _Hold | None:
    """The hold of the calling thread's ``phase`` (None outside one)."""
    return getattr(_THREAD, "hold", None)


def _shared_enter(fds: tuple[int, int] | None, urgent: bool) -> None:
    t0 = time.monotonic()
    with _SHARED_CV:
        while not urgent and _SHARED["n"] > 0 and fds is not None and not _turnstile_open(fds[0]):
            _SHARED_CV.wait(0.05)
        if _SHARED["n"] == 0:
            if fds is not None:
                _acquire(fds[0], fds[1], "shared_urgent" if urgent else "shared")
            _SHARED["since"] = time.monotonic()
        _SHARED["n"] += 1
    if fds is not None:
        _USAGE["wait_s"] += time.monotonic() - t0


def _shared_leave(fds: tuple[int, int] | None) -> None:
    with _SHARED_CV:
        _SHARED["n"] -= 1
        if _SHARED["n"] == 0:
            if fds is not None:
                fcntl.flock(fds[1], fcntl.LOCK_UN)
            _USAGE["shared_s"] += time.monotonic() - _SHARED["since"]
            _SHARED_CV.notify_all()


@contextlib.contextmanager
def _shared(fds: tuple[int, int] | None, urgent: bool = False):
    """A shared hold for one thread. A thread that comes while another of this process holds the device
    joins that hold, unless a timer is queued: then it waits until the last holder has left, and passes the
    turnstile behind the timer like any other job (a stream of overlapping holds cannot starve a timer).
    ``urgent``: past the turnstile (``phase``)."""
    _shared_enter(fds, urgent)
    with _holding(_Hold("shared_urgent" if urgent else "shared", fds), lambda: _shared_leave(fds)):
        yield


@contextlib.contextmanager
def _holding(hold: _Hold, release):
    """``hold`` is the calling thread's for the block; ``release()`` at its end, unless it stepped aside then."""
    _THREAD.hold = hold
    try:
        yield
    finally:
        if getattr(_THREAD, "outer", None) is hold:   # left while turned exclusive (``upgrade``)
            downgrade()
        _THREAD.hold = None
        with hold.lock:
            if not hold.aside:
                release()
            hold.aside = True   # a late step_aside (another thread's) finds it gone


def step_aside(hold: _Hold | None = None) -> bool:
    """Give the device back for a block that uses none of it (a Triton compile: CPU only; the binary goes to
    the device at the first launch, after it): a timer waiting meanwhile gets the device instead of waiting
    for the compile. ``hold``: the thread's (default) or one another thread captured (``compile_aside``).
    True when it was given back; ``step_back`` takes it again."""
    hold = hold or current_hold()
    if hold is None or hold.fds is None:
        return False
    with hold.lock:
        if hold.aside:
            return False
        if hold.mode == "exclusive":
            fcntl.flock(hold.fds[1], fcntl.LOCK_UN)
            _USAGE["exclusive_s"] += time.monotonic() - hold.since
        else:
            _shared_leave(hold.fds)
        hold.aside = True
        hold.since = time.monotonic()
    return True


def step_back(hold: _Hold | None = None) -> None:
    """Take the device again as ``step_aside`` found it held (a shared hold queues behind a timer that is waiting,
    an urgent one does not); a no-op unless it stepped aside."""
    hold = hold or current_hold()
    if hold is None or not hold.aside or hold.fds is None:
        return
    with hold.lock:
        if not hold.aside:
            return
        _USAGE["aside_s"] += time.monotonic() - hold.since
        t0 = time.monotonic()
        if hold.mode == "exclusive":
            _acquire(hold.fds[0], hold.fds[1], "exclusive")
            _USAGE["wait_s"] += time.monotonic() - t0
        else:
            _shared_enter(hold.fds, hold.mode == "shared_urgent")
        hold.aside = False
        hold.since = time.monotonic()


@contextlib.contextmanager
def aside():
    """The block runs with the calling thread's device hold given back (``step_aside``), taken again after it; for
    work that uses only the CPU (torch.compile's inductor compile: ``bench._inductor_aside``)."""
    stepped = aside_enabled() and step_aside()
    try:
        yield
    finally:
        if stepped:
            step_back()


def upgrade() -> bool:
    """Turn the calling thread's shared hold exclusive until ``downgrade`` (or the phase's end): the shared hold is
    given back, the device taken exclusively through the turnstile like any timer's, and the thread's hold is the
    exclusive one meanwhile (a compile inside steps aside from it). For the part of a shared phase whose result
    depends on having the device alone: an autotuner timing its configs (``autotune_exclusive``). False (a
    no-op) outside a shared phase, when already turned, or when another thread of this process holds the device
    too: the flock is one for all of them, and giving it up would take it from that thread (a bench job has one
    device thread)."""
    hold = current_hold()
    if (hold is None or hold.fds is None or hold.mode == "exclusive" or hold.aside
            or getattr(_THREAD, "outer", None) is not None):
        return False
    with _SHARED_CV:
        alone = _SHARED["n"] == 1
    if not alone or not step_aside(hold):
        return False
    t0 = time.monotonic()
    try:
        _acquire(hold.fds[0], hold.fds[1], "exclusive")
    except BaseException:
        step_back(hold)
        raise
    inner = _Hold("exclusive", hold.fds)
    _USAGE["wait_s"] += inner.since - t0
    _THREAD.outer = hold
    _THREAD.hold = inner
    return True


def downgrade() -> None:
    """End ``upgrade``: the exclusive hold is given back and the shared one taken again (it queues behind a waiting
    timer like any shared hold); a no-op when the thread is not turned."""
    outer = getattr(_THREAD, "outer", None)
    if outer is None:
        return
    inner = _THREAD.hold
    _THREAD.outer = None
    _THREAD.hold = outer
    if inner is not None:
        step_aside(inner)   # gives the exclusive hold back (a no-op if a compile has it aside now)
    step_back(outer)


@contextlib.contextmanager
def autotune_exclusive(enabled: bool = True, exclusive: bool = True):
    """For the block, Triton's autotuners time their configs with the device to themselves: ``Autotuner._bench`` (one
    config's timing, after its compile when the config is new) turns the calling thread's shared hold exclusive
    (``upgrade``), and the autotuner's ``run`` turns it back when it returns, so the configs of one tuning key are
    timed in one exclusive hold and the kernel's other calls stay shared. The pick an autotuner keeps for the rest of
    the job is then the one it would make on an idle device, whether the autotuner is in the task's own source or in
    a library it imports. Yields whether it took (False where Triton has no such class, or ``enabled`` is False); the
    class is restored after the block, so no timed call pays for the wrapper. An autotuner class that overrides
    ``_bench`` or ``run`` is not covered.

    Before the first config is timed, every config the autotuner will time is compiled in threads with the device
    hold given back (``_compile_ahead``): one after another inside the timing, each compile stepped aside and queued
    for the device again (an autotuned int4 matmul's 36 configs: 133 s waiting and 154 s aside in one bench job of an
    H100 corpus batch, 2026-12-05, for 15 s of timing). ``exclusive`` False: only that, the timing keeps the hold
    it has (a job whose picks nothing later uses: the probe's run at the checked shapes)."""
    import functools
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        enabled = False
    bench_fn = Autotuner.__dict__.get("_bench") if enabled else None
    run_fn = Autotuner.__dict__.get("run") if enabled else None
    prune_fn = Autotuner.__dict__.get("prune_configs") if enabled else None
    if bench_fn is None or run_fn is None or getattr(bench_fn, "__tritondx_exclusive__", False):
        yield bool(bench_fn is not None and getattr(bench_fn, "__tritondx_exclusive__", False))
        return

    @functools.wraps(bench_fn)
    def _bench(self, *args, **kwargs):
        pending = self.__dict__.pop("_tritondx_to_compile", None)
        if pending:   # the call's own keywords: Triton passes the config as ``config=``
            with aside():
                _compile_ahead(self, pending, args, {k: v for k, v in kwargs.items() if k != "config"})
        if exclusive:
            upgrade()
        return bench_fn(self, *args, **kwargs)

    def prune_configs(self, *args, **kwargs):   # called where the key is new, before the configs are timed
        pruned = prune_fn(self, *args, **kwargs)
        if len(pruned) > 1:
            self._tritondx_to_compile = list(pruned)
        return pruned

    @functools.wraps(run_fn)
    def run(self, *args, **kwargs):
        depth = getattr(_THREAD, "tune_depth", 0)
        _THREAD.tune_depth = depth + 1
        try:
            return run_fn(self, *args, **kwargs)
        finally:
            _THREAD.tune_depth = depth
            self.__dict__.pop("_tritondx_to_compile", None)   # a pick read from the disk cache timed nothing
            if depth == 0 and exclusive:
                downgrade()

    _bench.__tritondx_exclusive__ = True
    Autotuner._bench, Autotuner.run = _bench, run
    if prune_fn is not None:
        Autotuner.prune_configs = prune_configs
    try:
        yield True
    finally:
        Autotuner._bench, Autotuner.run = bench_fn, run_fn
        if prune_fn is not None:
            Autotuner.prune_configs = prune_fn


#: threads that compile an autotuner's configs ahead of its timing (``_compile_ahead``)
COMPILE_AHEAD_THREADS = 4


def _compile_ahead(tuner, configs: list, args: tuple, meta: dict) -> int:
    """Compile ``configs`` of ``tuner`` (a Triton ``Autotuner``) for the call ``args``/``meta`` in threads, each a
    warm-up launch (``warmup=True``: compiled into Triton's caches, nothing runs on the device). Triton's compile
    releases the GIL in its MLIR passes and ptxas is a process of its own, so they compile side by side. A config that
    fails to compile is left to the timing, which reports it the way Triton does. The configs compiled."""
    from concurrent.futures import ThreadPoolExecutor

    def one(config) -> bool:
        try:
            tuner.fn.run(*args, **{**meta, **config.all_kwargs(), "warmup": True})
            return True
        except Exception:   # noqa: BLE001 - the timing compiles it again and reports
            return False

    threads = min(COMPILE_AHEAD_THREADS, len(configs))
    if threads < 1:
        return 0
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="autotune-compile") as pool:
        # the first alone: the kernel's per-device caches are made at its first launch, not under a lock
        first = pool.submit(one, configs[0]).result()
        return first + sum(pool.map(one, configs[1:]))


#: "0": compiles keep the device hold (the measurement of what stepping aside changes: bench/METHOD.md)
ASIDE_ENV = "TRITONDX_JOB_COMPILE_ASIDE"


def aside_enabled() -> bool:
    return os.environ.get(ASIDE_ENV, "1") != "0"


#: a compile shorter than this keeps the hold (a cache hit reads files in milliseconds; giving the device back
#: would queue it behind every waiting timer for nothing)
ASIDE_AFTER_S = 0.25


def compile_aside(fn, after_s: float = ASIDE_AFTER_S):
    """``fn`` (Triton's ``compile``) that gives the calling thread's device hold back while it runs longer than
    ``after_s``, and takes it again before returning (``step_aside``)."""
    import functools

    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        hold = current_hold()
        if hold is None or hold.fds is None:
            return fn(*args, **kwargs)
        gate = threading.Lock()
        state = {"done": False, "aside": False}

        def give_back() -> None:
            with gate:
                if not state["done"]:
                    state["aside"] = step_aside(hold)

        timer = threading.Timer(after_s, give_back)
        timer.daemon = True
        timer.start()
        try:
            return fn(*args, **kwargs)
        finally:
            with gate:
                state["done"] = True
            timer.cancel()
            if state["aside"]:
                step_back(hold)

    compiled.__tritondx_aside__ = True
    return compiled


def install_compile_aside() -> bool:
    """Make this process's Triton compiles give the device hold back (``compile_aside``): ``triton.compile`` and
    ``triton.compiler.compile``, which a kernel's launcher binds at its first launch; call it before any kernel
    runs. False where Triton has no such function (the interpreter needs none) or ``ASIDE_ENV`` is "0"."""
    if not aside_enabled():
        return False
    try:
        import triton
        import triton.compiler as tc
    except ImportError:
        return False
    fn = getattr(tc, "compile", None)
    if fn is None:
        return False
    if getattr(fn, "__tritondx_aside__", False):
        return True
    wrapped = compile_aside(fn)
    tc.compile = wrapped
    if getattr(triton, "compile", None) is fn:
        triton.compile = wrapped
    return True


@contextlib.contextmanager
def phase(mode: str, urgent: bool = False):
    """Job side: hold the device ``"shared"`` (any device work) or ``"exclusive"`` (timing) for
    the block. Without a lock it only counts the seconds (``usage``). Not re-entrant: leave one phase
    before entering another. Threads of one process may hold ``"shared"`` at once (``_shared``); an
    exclusive phase is for a process whose other threads hold none. ``urgent`` (shared only): the hold does
    not queue behind a timer that waits for the device, it delays that timer instead: the hardware check's
    calls under ncu, which hold the profiler lock that every ncu session of the batch waits on (on the H200,
    2026-12-03, one check held the profiler 32.7 s for 9.6 s of work). The timer still never runs beside it."""
    fds = _job_fds()
    alone = os.environ.get(JOB_ALONE_ENV) == "1"
    if mode == "shared" and not alone:
        with _shared(fds, urgent):
            yield
        return
    t0 = time.monotonic()
    if fds is None:
        try:
            yield
        finally:
            _USAGE[f"{mode}_s"] += time.monotonic() - t0
        return
    t, g = fds
    if alone:
        mode = "exclusive"
    _acquire(t, g, mode)
    hold = _Hold("exclusive", fds)
    _USAGE["wait_s"] += hold.since - t0

    def release() -> None:
        fcntl.flock(g, fcntl.LOCK_UN)
        _USAGE["exclusive_s"] += time.monotonic() - hold.since
    with _holding(hold, release):
        yield


_PROFILER_FD: int | None = None


def _profiler_fd() -> int | None:
    """The profiler lock: the job's third handed-over descriptor, or (the orchestrator, which starts ncu
    itself) opened once from ``TRITONDX_LOCK_DIR``; None without a lock."""
    global _PROFILER_FD
    parts = os.environ.get(JOB_LOCK_ENV, "").split(",")
    if len(parts) == 3:
        try:
            return int(parts[2])
        except ValueError:
            return None
    if os.environ.get(JOB_LOCK_ENV):
        return None
    d = _lock_dir()
    if d is None:
        return None
    if _PROFILER_FD is None:
        _PROFILER_FD = _open_profiler(d)
    return _PROFILER_FD


_PROFILER_HELD = threading.Lock()   # threads of one process take turns too (flock is per open file)

# Who waits for the profiler: an open-file-description (OFD) read lock on the profiler file's first byte, held
# by every *urgent* waiter (a run's next step waits on its answer: a profile tier, a winner's hardware check)
# until it holds the profiler. A *speculative* session (the initial kernel's hardware check started in triage,
# before any round had a winner) takes the profiler only when no urgent one waits: on the H200 (2026-12-03,
# 8 corpus tasks) eight speculative checks queued at the start held the profiler ~20 s each while every task's
# profile tier waited behind them (150-300 s from escalation to profiled). OFD locks and flock do not interact
# (Linux), so the byte lock marks the queue and the flock is the profiler itself.
_WAITING = 0


def _byte_lock(fd: int, kind: int, wait: bool) -> bool:
    """OFD lock (``kind``: F_RDLCK, F_WRLCK, F_UNLCK) on byte 0 of ``fd``; False when ``wait`` is off and another
    open file description holds a conflicting one. ``struct flock`` on Linux x86-64/aarch64: 32 bytes."""
    import errno
    import struct
    arg = struct.pack("hhxxxxqqixxxx", kind, os.SEEK_SET, _WAITING, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, arg)
        return True
    except OSError as exc:
        if not wait and exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise


def take_profiler(fd: int, urgent: bool = True) -> None:
    """Hold the profiler lock on ``fd`` (an open file description of its own), urgent waiters first."""
    if urgent:
        _byte_lock(fd, fcntl.F_RDLCK, wait=True)    # "an urgent session waits"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            _byte_lock(fd, fcntl.F_UNLCK, wait=True)
        return
    while True:
        _byte_lock(fd, fcntl.F_WRLCK, wait=True)    # until no urgent session waits
        _byte_lock(fd, fcntl.F_UNLCK, wait=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _byte_lock(fd, fcntl.F_WRLCK, wait=False):   # still none: it is ours
            _byte_lock(fd, fcntl.F_UNLCK, wait=True)
            return
        fcntl.flock(fd, fcntl.LOCK_UN)              # one came while we waited: it goes first


@contextlib.contextmanager
def profiler(urgent: bool = True):
    """Hold the GPU's profiler for a block that runs a process under ncu until it has ended, from before its
    first CUDA call (``hwcheck._profile``: a preloaded runner's Python, torch and Triton start come before):
    one ncu session at a time on the device. Not a device phase: the profiled process takes
    those itself. Without a lock directory only the threads of this process take turns. ``urgent`` False: a
    speculative session, which lets every urgent one waiting meanwhile go first (``take_profiler``)."""
    t0 = time.monotonic()
    with _PROFILER_HELD:
        fd = _profiler_fd()
        if fd is not None:
            take_profiler(fd, urgent)
        _USAGE["wait_s"] += time.monotonic() - t0
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
