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
