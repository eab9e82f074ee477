"""GPU: a real Triton autotuner inside a bench warm-up's shared hold times its configs with the device held
exclusively (``gpulock.autotune_exclusive``), and its later calls (a cache hit) stay shared (run: pytest tests/gpu -m
gpu). The CPU test (tests/cpu/core/test_gpulock.py) fakes ``Autotuner._bench``; this one checks that the installed
Triton's autotuner goes through the methods the wrapper replaces."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_a_real_autotuner_times_its_configs_exclusively_and_then_runs_shared(tmp_path, monkeypatch):
    import triton
    import triton.language as tl

    from tritondx.tools.exec import gpulock
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    modes: list[str] = []

    def note(nargs):   # a config's pre_hook: runs before each timed call of that config, and before the real call
        hold = gpulock.current_hold()
        modes.append(hold.mode if hold else "none")

    configs = [triton.Config({"BLOCK": b}, num_warps=4, pre_hook=note) for b in (256, 1024)]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

    x = torch.zeros(1 << 16, device="cuda")
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    with gpulock.autotune_exclusive() as took, gpulock.phase("shared"):
        assert took
        add_one[grid](x, x.numel())          # a miss: every config timed, then the call
        tuned = list(modes)
        modes.clear()
        add_one[grid](x, x.numel())          # a hit
        torch.cuda.synchronize()
        assert gpulock.current_hold().mode == "shared"
    assert tuned and set(tuned) == {"exclusive"}, tuned
    assert modes == ["shared"], modes
    assert gpulock.usage()["exclusive_s"] > 0


def test_a_real_autotuners_configs_are_compiled_on_threads_before_the_first_is_timed(tmp_path, monkeypatch):
    """The installed Triton's autotuner goes through ``prune_configs`` and ``_bench`` the way the compile-ahead
    expects: every config is compiled (a warm-up launch) on a thread of its own before the first is timed, and the
    timing compiles nothing."""
    import threading

    import triton
    import triton.compiler as tc
    import triton.language as tl

    from tritondx.tools.exec import gpulock
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    events: list[tuple[str, bool]] = []
    main = threading.get_ident()
    orig = tc.compile

    def counting(*args, **kwargs):
        events.append(("compile", threading.get_ident() != main))
        return orig(*args, **kwargs)
    monkeypatch.setattr(tc, "compile", counting)

    def note(nargs):
        events.append(("call", True))

    configs = [triton.Config({"BLOCK": b}, num_warps=w, pre_hook=note) for b in (128, 512) for w in (2, 4)]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def add_two(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 2.0, mask=offs < n)

    x = torch.zeros(1 << 14, device="cuda")
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    with gpulock.autotune_exclusive(), gpulock.phase("shared"):
        add_two[grid](x, x.numel())
        torch.cuda.synchronize()
    compiles = [e for e in events if e[0] == "compile"]
    first_call = next(i for i, e in enumerate(events) if e[0] == "call")
    assert len(compiles) == 4 and all(threaded for _, threaded in compiles), events
    assert all(e[0] == "compile" for e in events[:first_call]) and first_call == 4, events
