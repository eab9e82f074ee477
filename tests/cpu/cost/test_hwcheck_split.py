"""The hardware check in two halves (verify/timing.py): the initial kernel's ncu measurement starts when a
round has a would-be winner (beside its full checks) and serves the task's later rounds; the check after the
full checks measures the best alone. Run on CPU with the hwcheck job faked (no ncu here)."""

from __future__ import annotations

import threading

from tritondx.agents.common import runtime_for
from tritondx.config import RunConfig
from tritondx.tools.exec.sandbox import JobResult
from tritondx.tools.verify import timing


class FakeJobs:
    def __init__(self, initial_ok: bool = True):
        self.jobs: list[dict] = []
        self.initial_ok = initial_ok
        self.lock = threading.Lock()

    def __call__(self, job, backend, timeout, **kw):
        with self.lock:
            self.jobs.append(job)
        out = {"ok": True, "shape": [4096]}
        if "initial" in job["measure"]:
            if not self.initial_ok:
                return JobResult(kind="ok", returncode=0, seconds=1.0,
                                 result={"ok": False, "unavailable": True, "note": f"{timing.HW_UNAVAILABLE}: died"}), 1, 0
            out["initial"] = {"ns_per_call": 2000.0, "kernels": ["axpy_kernel"], "launches": 5}
        if "best" in job["measure"]:
            out["best"] = {"ns_per_call": 1000.0, "kernels": ["axpy_kernel"], "launches": 5, "preloaded": True,
                           "seconds": {"start_s": 4.0, "lock_wait_s": 1.0, "lock_s": 9.0}}
        return JobResult(kind="ok", returncode=0, seconds=1.0, result=out), 1.0, 0.5


class Cuda:
    name = "cuda"


def _setup(monkeypatch, tmp_path, *names: str, fake=None):
    """The hwcheck jobs faked (``fake``, else a ``FakeJobs``), no initial half kept from another test, and a file per
    name (``task``, ``best``, ...): (the fake, the files' paths). Tests whose halves run in the background take the
    ``hw_pools`` fixture too (tests/cpu/conftest.py)."""
    fake = fake or FakeJobs()
    monkeypatch.setattr(timing, "run_device_job", fake)
    monkeypatch.setattr(timing, "_initial", {})
    paths = []
    for n in names:
        p = tmp_path / f"{n}.py"
        p.write_text(f"# {n}\n")
        paths.append(p)
    return fake, paths


def test_the_initial_half_runs_once_per_task_and_the_check_then_measures_the_best_alone(tmp_path, monkeypatch, hw_pools):
    fake, (task, best) = _setup(monkeypatch, tmp_path, "task", "best")
    fut = timing.initial_hardware(str(task), Cuda())
    assert timing.initial_hardware(str(task), Cuda()) is fut     # a later round: the same measurement
    hw = timing.hardware_check(str(task), str(best), 1.9, Cuda(), initial=fut)
    assert [j["measure"] for j in fake.jobs] == [["initial"], ["best"]]
    assert "candidate" not in fake.jobs[0] and fake.jobs[1]["candidate"] == str(best.resolve())
    assert hw.confirmed and hw.measured == 2.0 and hw.initial_ns_per_call == 2000.0
    assert hw.ncu_seconds == {"best": {"start_s": 4.0, "lock_wait_s": 1.0, "lock_s": 9.0, "preloaded": True}}
    assert hw.device_seconds == 1.0   # both jobs' device holds (0.5 s each): the run's device seconds add them
    again = timing.hardware_check(str(task), str(best), 1.9, Cuda(), initial=fut)   # a later round's check
    assert again.device_seconds == 0.5   # the initial half counted once
    assert not [k for k in fut.result() if k.startswith("_")]   # recorded beside the answer, not inside it
    hw2 = timing.hardware_check(str(task), str(best), 1.9, Cuda())   # no early half: both in one job
    assert fake.jobs[-1]["measure"] == ["initial", "best"] and hw2.confirmed and hw2.device_seconds == 0.5


def test_an_initial_half_that_could_not_measure_leaves_the_claim_unconfirmed_and_runs_no_best(tmp_path, monkeypatch, hw_pools):
    fake, (task, best) = _setup(monkeypatch, tmp_path, "task", "best", fake=FakeJobs(initial_ok=False))
    hw = timing.hardware_check(str(task), str(best), 1.9, Cuda(), initial=timing.initial_hardware(str(task), Cuda()))
    assert not hw.confirmed and hw.note.startswith(timing.HW_UNAVAILABLE)
    assert [j["measure"] for j in fake.jobs] == [["initial"]]
    timing.initial_hardware(str(task), Cuda()).result()   # a failed half is measured again when asked again
    assert [j["measure"] for j in fake.jobs] == [["initial"], ["initial"]]


def _lock_trace(monkeypatch, tmp_path, busy_attempts: int = 0, stage_dies: bool = False, prewarm: bool = False
                ) -> tuple[list[tuple[str, bool]], dict]:
    """What a hwcheck's ``_measure`` did, each step with whether it held the profiler lock (ncu faked), and its
    answer. ``busy_attempts``: that many first runners' ncu logs say another session held the counters.
    ``prewarm``: the prewarm runner (faked) runs, else it is switched off (``TRITONDX_JOB_HW_PREWARM=0``)."""
    import contextlib

    import torch

    from tritondx.tools.verify.judge import hwcheck
    held = {"n": 0}
    seen: list[tuple[str, bool]] = []
    attempts = {"n": 0}
    staged: list = []   # inputs handed over before the hello, and what each call named (an index, or its inputs)
    calls: list = []
    monkeypatch.chdir(tmp_path)

    @contextlib.contextmanager
    def profiler(urgent=True):
        held["n"] += 1
        try:
            yield
        finally:
            held["n"] -= 1

    class Runner:
        def __init__(self, log_file, busy):
            self.log_file, self.busy = log_file, busy

        def begin(self):
            seen.append(("hello", held["n"] > 0))
            return {"ok": True}

        def stage(self, args):
            seen.append(("stage", held["n"] > 0))
            if stage_dies:
                from tritondx.tools.verify.judge.spawn import RunnerDied
                raise RunnerDied("error", "the runner broke the protocol")
            staged.append(args)
            return len(staged) - 1

        def call(self, args, profile=False, inputs_back=True, staged=None):
            seen.append(("profiled call" if profile else "warm-up call", held["n"] > 0))
            calls.append(staged if staged is not None else args)
            return {"outs": [torch.ones(2)], "diag": {}}

        def close(self):
            seen.append(("close", held["n"] > 0))
            self.log_file.write_text("==ERROR== Profiling failed because a driver resource was unavailable.\n"
                                     if self.busy else "rows\n")

    class Prewarm:
        def __init__(self, path, inputs, label):
            self.dir = tmp_path / f"prewarm-{label}-{len(warm_dirs)}"
            self.dir.mkdir()
            warm_dirs.append(self.dir)
            seen.append(("prewarm call", held["n"] > 0))
            self.seconds, self.ok = 2.5, True

        def wait(self):
            seen.append(("prewarm ended", held["n"] > 0))
            return self.dir

        def remove(self):
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    warm_dirs: list = []
    if prewarm:
        monkeypatch.setattr(hwcheck, "_Prewarm", Prewarm)
        monkeypatch.setenv(hwcheck.PREWARM_ENV, "1")
    else:
        monkeypatch.setenv(hwcheck.PREWARM_ENV, "0")

    def start(exe, path, label, preload=False, cache_dir=None):
        seen.append(("start, preloaded" if preload else "start", held["n"] > 0))
        if cache_dir is not None:
            seen.append((f"cache {cache_dir.name}, exists {cache_dir.is_dir()}", held["n"] > 0))
        attempts["n"] += 1
        log_file = tmp_path / f"ncu-{label}.csv"
        log_file.unlink(missing_ok=True)
        return Runner(log_file, attempts["n"] <= busy_attempts), log_file

    monkeypatch.setattr(hwcheck, "profiler", profiler)
    monkeypatch.setattr(hwcheck, "device_phase", lambda device, urgent=False: contextlib.nullcontext())
    monkeypatch.setattr(hwcheck, "_start", start)
    monkeypatch.setattr(hwcheck, "parse_raw_csv",
                        lambda text: [{"kernel": "k", "duration_ns": 10.0}] * 3 if text == "rows\n" else [])
    cases = [((torch.ones(2),), (torch.ones(2),))] * 4
    out = hwcheck._measure("ncu", "task.py", cases, 1e-5, 1e-5, "initial")
    assert out["ns_per_call"] == 10.0
    out["_staged"], out["_calls"], out["_warm_dirs"] = staged, calls, warm_dirs
    return seen, out


_MEASURED = [("warm-up call", True), ("profiled call", True), ("profiled call", True), ("profiled call", True),
             ("close", True)]


def test_the_profiler_lock_covers_an_ncu_runner_from_its_hello_to_its_end(monkeypatch, tmp_path):
    """Python, torch and Triton start before the lock (no CUDA call there: ``runner.py``'s preload); the lock
    covers the candidate's import (its first CUDA call may be there), the calls and the exit (ncu writes its
    report then). Not only the profiled calls: with the lock held around those alone, 3 of 4 hardware checks
    run at once on the H200 failed ("a driver resource was unavailable"; bench/results/cost_h200_20261202,
    ncu_overlap.json)."""
    seen, out = _lock_trace(monkeypatch, tmp_path)
    assert seen == [("start, preloaded", False), *[("stage", False)] * 4, ("hello", True), *_MEASURED]
    # every call's inputs crossed the pipes before the lock; the calls under it name them by index
    assert len(out["_staged"]) == 4 and out["_calls"] == [0, 1, 2, 3]
    assert out["preloaded"] is True and set(k for k in out["seconds"] if not k.startswith("_")) == {"start_s", "lock_wait_s", "lock_s", "hello_s", "warmup_s", "calls_s", "exit_s"}


def test_a_prewarm_runner_compiles_outside_the_lock_and_the_runner_under_ncu_starts_from_its_cache(monkeypatch,
                                                                                                     tmp_path):
    """The warm-up call under the lock compiled and autotuned there (1.2-8.5 s on the H200, 2026-12-03): a runner
    of the same source, not under ncu, does it first, outside the lock, into a folder the runner under ncu reads
    from; the folder is gone after the measurement."""
    seen, out = _lock_trace(monkeypatch, tmp_path, prewarm=True)
    assert seen == [("prewarm call", False), ("start, preloaded", False), ("cache prewarm-initial-0, exists True", False),
                    *[("stage", False)] * 4, ("prewarm ended", False), ("hello", True), *_MEASURED]
    assert out["seconds"]["prewarm_s"] == 2.5 and out["seconds"]["prewarmed"] == 1.0
    assert [d.exists() for d in out["_warm_dirs"]] == [False]


def test_only_a_source_that_autotunes_gets_a_prewarm_runner_unless_told(monkeypatch, tmp_path):
    from tritondx.tools.verify.judge import hwcheck
    tuned, plain = tmp_path / "tuned.py", tmp_path / "plain.py"
    tuned.write_text("import triton\n@triton.autotune(configs=[triton.Config({'B': 64})], key=['n'])\n@triton.jit\n"
                     "def k(x, n, B: tl.constexpr):\n    pass\n")
    plain.write_text("import triton\n# autotuned once, offline\n@triton.jit\ndef k(x, n, B: tl.constexpr):\n    pass\n")
    monkeypatch.delenv(hwcheck.PREWARM_ENV, raising=False)
    assert hwcheck._wants_prewarm(str(tuned)) and not hwcheck._wants_prewarm(str(plain))
    monkeypatch.setenv(hwcheck.PREWARM_ENV, "0")
    assert not hwcheck._wants_prewarm(str(tuned))
    monkeypatch.setenv(hwcheck.PREWARM_ENV, "1")
    assert hwcheck._wants_prewarm(str(plain))


def test_a_retry_after_lost_counters_gets_no_prewarm_and_each_prewarm_folder_is_removed(monkeypatch, tmp_path):
    seen, out = _lock_trace(monkeypatch, tmp_path, busy_attempts=1, prewarm=True)
    assert seen.count(("prewarm call", False)) == 1 and ("start", True) in seen   # the retry: whole life under the lock
    assert [d.exists() for d in out["_warm_dirs"]] == [False]


def test_a_runner_with_a_cache_folder_keeps_compiles_and_autotuning_there_and_gets_no_namespaces(monkeypatch,
                                                                                                 tmp_path):
    """What a prewarm runner and the runner under ncu that follows it share: the Triton cache folder (compiles and,
    with ``TRITON_CACHE_AUTOTUNING``, autotuning results), outside any private /tmp of a namespace."""
    import pytest

    from tritondx.tools.verify.judge import spawn
    started: list = []

    class Started(Exception):
        pass

    def popen(cmd, **kw):
        started.append((cmd, kw["env"]))
        raise Started

    monkeypatch.setattr(spawn.subprocess, "Popen", popen)
    monkeypatch.setattr(spawn, "runner_prefix", lambda iso: (["unshare", "--user"], True))
    for cache in (tmp_path / "cache", None):
        with pytest.raises(Started):
            spawn.RunnerProcess(None, "cuda", [], hide=[], cache_dir=cache)
    (cmd, env), (cmd0, env0) = started
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache") and env[spawn.AUTOTUNE_CACHE_ENV] == "1"
    assert "unshare" not in cmd and "unshare" in cmd0   # its compiles must outlive it: no private /tmp
    assert env0["TRITON_CACHE_DIR"].endswith(".triton") and spawn.AUTOTUNE_CACHE_ENV not in env0


def test_a_runner_that_fails_while_inputs_are_staged_is_measured_unstaged_never_rejected(monkeypatch, tmp_path):
    """Staging comes before the candidate's import: a failure there is this tool's, not the candidate's; the
    runner is started again under the lock and its calls send their inputs themselves."""
    seen, out = _lock_trace(monkeypatch, tmp_path, stage_dies=True)
    assert seen == [("start, preloaded", False), ("stage", False), ("close", False), ("start", True),
                    ("hello", True), *_MEASURED]
    assert all(isinstance(c, list) for c in out["_calls"]) and out["seconds"]["stage_failed"] == 1.0


def test_without_preload_the_lock_covers_the_whole_life(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONDX_JOB_NCU_PRELOAD", "0")
    seen, out = _lock_trace(monkeypatch, tmp_path)
    assert seen == [("start", True), ("hello", True), *_MEASURED] and out["preloaded"] is False
    assert out["_staged"] == [] and all(isinstance(c, list) for c in out["_calls"])   # inputs sent with each call


def test_a_runner_that_lost_the_counters_is_measured_again_holding_the_lock_for_its_whole_life(monkeypatch, tmp_path):
    seen, out = _lock_trace(monkeypatch, tmp_path, busy_attempts=1)
    assert seen == [("start, preloaded", False), *[("stage", False)] * 4, ("hello", True), *_MEASURED,
                    ("start", True), ("hello", True), *_MEASURED]
    assert out["preloaded"] is False and "driver resource unavailable" in out["retried_whole_life_lock"]


def test_a_second_loss_of_the_counters_stands(monkeypatch, tmp_path):
    import pytest

    from tritondx.tools.exec.rejected import Rejected
    with pytest.raises(Rejected, match="ncu gave no kernel durations"):
        _lock_trace(monkeypatch, tmp_path, busy_attempts=2)


def test_triage_starts_the_initial_half_once_the_probe_accepted_the_task(tmp_path, monkeypatch):
    """On a backend Nsight Compute reads (CUDA), triage starts the initial kernel's half of the hardware check
    in the background (beside the rewrite and the screen), on the run folder's copy the verifier checks later, as
    a speculative session (behind every urgent ncu session); not with ncu off, not with TRITONDX_HW_INITIAL_AT=contender, not in diagnose mode, not on the interpreter."""
    from pathlib import Path

    from tritondx.agents import triage as T
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.backends.cuda.backend import CudaBackend
    example = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"
    started: list[str] = []
    monkeypatch.setattr(T, "probe_task", lambda path, backend: {"ok": True})
    monkeypatch.setattr(T.servers, "prestart", lambda *a, **k: None)
    monkeypatch.setattr(T, "initial_hardware",
                        lambda path, backend, speculative=False: started.append(path) if speculative else None)

    def triaged(backend, env=None, **config):
        started.clear()
        monkeypatch.setattr(T, "get_backend", lambda name: backend)
        if env:
            monkeypatch.setenv(timing.HW_INITIAL_AT_ENV, env)
        else:
            monkeypatch.delenv(timing.HW_INITIAL_AT_ENV, raising=False)
        run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        run.mkdir()
        state = {"task_path": str(example), "run_dir": str(run)}
        T.triage_node(state, {"configurable": {"thread_id": "t"}},
                      runtime_for(RunConfig(backend=backend.name, **config)))
        return list(started), run

    got, run = triaged(CudaBackend())
    assert got == [str(run / "task_initial.py")]
    assert triaged(CudaBackend(), ncu=False)[0] == []
    assert triaged(CudaBackend(), env="contender")[0] == []
    assert triaged(CudaBackend(), mode="diagnose")[0] == []
    assert triaged(get_backend("interpreter"))[0] == []


def test_hwcheck_jobs_read_the_tasks_trusted_compiles(tmp_path, monkeypatch):
    """The initial kernel's warm-up call under the profiler lock loads the probe's binary (the trusted layer,
    as in every bench and judge job) instead of compiling while every other task's check waits for the lock."""
    from tritondx.tools.exec import triton_cache
    monkeypatch.setenv("TRITONDX_CACHE", str(tmp_path / "cache"))
    task = tmp_path / "task.py"
    task.write_text("# a task\n")
    seen = []
    monkeypatch.setattr(timing, "run_device_job",
                        lambda job, backend, timeout, extra_env=None, **kw: (seen.append(extra_env),
                                                                            FakeJobs()(job, backend, timeout))[1])
    monkeypatch.setattr(triton_cache, "enabled", lambda: True)
    timing._hwcheck_job(str(task), Cuda(), 60, ["initial"])
    assert seen[-1] == {}   # no layer yet (no trusted job compiled the task)
    triton_cache.writer_env(task.read_text())   # the probe's layer
    timing._hwcheck_job(str(task), Cuda(), 60, ["initial"])
    assert seen[-1]["TRITON_CACHE_MANAGER"] == triton_cache.MANAGER
    assert seen[-1][triton_cache.TRUSTED_ENV] == str(triton_cache.trusted_dir(task.read_text()))
    monkeypatch.setattr(triton_cache, "enabled", lambda: False)   # no read-only sandbox: no layer
    timing._hwcheck_job(str(task), Cuda(), 60, ["initial"])
    assert seen[-1] == {}


def test_an_early_measurement_discarded_before_its_best_runs_measures_nothing_more(tmp_path, monkeypatch, hw_pools):
    """The contender it was started for lost its full checks while the initial half still ran: no ncu session of the
    best follows (the batch's profiler lock is not held for a check nobody reads), and the initial half stays
    uncounted for the check that uses it."""
    gate = threading.Event()

    class SlowInitial(FakeJobs):
        def __call__(self, job, backend, timeout, **kw):
            if "initial" in job["measure"]:
                assert gate.wait(30)
            return super().__call__(job, backend, timeout, **kw)
    fake, (task, loser, winner) = _setup(monkeypatch, tmp_path, "task", "loser", "winner", fake=SlowInitial())
    fut = timing.initial_hardware(str(task), Cuda())
    early = timing.early_hardware(str(task), str(loser), Cuda(), initial=fut)
    timing.discard_early(str(task), early)
    gate.set()
    # cancelled while still queued, or stopped once the initial half it waited on ended: no best job either way
    assert early.cancelled() or early.result(timeout=30)["note"] == timing.NOT_NEEDED
    assert [j["measure"] for j in fake.jobs] == [["initial"]]
    assert timing.unused_device_seconds(str(task)) == 0.0
    hw = timing.hardware_check(str(task), str(winner), 1.9, Cuda(), initial=fut)   # the round's actual winner
    assert hw.confirmed and hw.device_seconds == 1.0   # the initial half counted here, once


def test_an_early_measurement_discarded_after_it_ran_is_counted_for_the_run(tmp_path, monkeypatch, hw_pools):
    fake, (task, loser) = _setup(monkeypatch, tmp_path, "task", "loser")
    early = timing.early_hardware(str(task), str(loser), Cuda(), initial=timing.initial_hardware(str(task), Cuda()))
    early.result(timeout=30)
    timing.discard_early(str(task), early)
    assert [j["measure"] for j in fake.jobs] == [["initial"], ["best"]]
    assert timing.unused_device_seconds(str(task)) == 1.0   # both halves' device holds: spent, so counted
    assert timing.unused_device_seconds(str(task)) == 0.0   # once
