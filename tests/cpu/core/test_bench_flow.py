"""The bench job's control flow on the CPU (interpreter), with the CUDA event clock replaced by a
host clock. Times mean nothing here; what is checked is that every variant comes back with its
rounds, spread and roofline fields, that the lock phases are entered, and that a variant replacing
a timing function while it is timed is named. (A GPU run is too scarce to find a typo with.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


class _FakeEvent:
    def __init__(self, enable_timing=True):
        self.t = 0.0

    def record(self):
        self.t = time.perf_counter()


@pytest.fixture
def bench_mod(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    from tritondx.tools.bench import bench as bench_job
    monkeypatch.setattr(bench_job, "_Event", _FakeEvent)
    monkeypatch.setattr(bench_job, "_record", lambda ev: ev.record())
    monkeypatch.setattr(bench_job, "_elapsed", lambda s, e: (e.t - s.t) * 1e3)
    monkeypatch.setattr(bench_job, "_synchronize", lambda: None)
    monkeypatch.setattr(bench_job, "L2_FLUSH_BYTES", 1 << 16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "fake-device")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    ceil = tmp_path / "ceilings.json"
    ceil.write_text(json.dumps({"device": "fake-device", "copy_bytes_per_s": 1e12, "l2_bytes": 1 << 20,
                                "matmul_flops_per_s": {"bf16": 1e15, "tf32": 5e14, "fp32": 5e13}}))
    return bench_job, ceil


def _task(tmp_path: Path, name: str, src: Path) -> Path:
    text = src.read_text().replace("BENCH_SHAPES = [(1 << 24,)]", "BENCH_SHAPES = [(4096,)]")
    assert "BENCH_SHAPES = [(4096,)]" in text
    p = tmp_path / name
    p.write_text(text)
    return p


def _record_phases(monkeypatch, bench_job) -> list[str]:
    """The device holds the bench job enters, in order (the lock itself is not taken)."""
    import contextlib
    phases: list[str] = []

    @contextlib.contextmanager
    def phase(mode):
        phases.append(mode)
        yield

    monkeypatch.setattr(bench_job, "phase", phase)
    return phases


def test_bench_returns_every_variant(bench_mod, tmp_path, monkeypatch):
    bench_job, ceil = bench_mod
    phases = _record_phases(monkeypatch, bench_job)
    task = _task(tmp_path, "task.py", ROOT / "tests/cpu/verifier/tiny_axpy.py")
    other = _task(tmp_path, "other.py", ROOT / "tests/cpu/verifier/controls/axpy_block1024.py")
    out = bench_job.bench({"task": str(task), "device": "cpu", "rounds": 2, "ceilings_file": str(ceil),
                            "variants": [{"id": "initial", "path": str(task)}, {"id": "b1024", "path": str(other)}]})
    assert out["device"] == "fake-device" and len(out["shapes"]) == 1
    entry = out["shapes"][0]
    assert set(entry["variants"]) == {"initial", "b1024"}, entry
    for v in entry["variants"].values():
        assert len(v["round_medians_ms"]) == 2 and v["median_ms"] > 0 and v["spread"] >= 0
        assert v["roofline_fraction"] is not None and v["host_us_per_call"] > 0
    assert entry["bytes"] == 3 * 4096 * 4
    assert phases == ["shared", "exclusive"]


def test_an_autotuned_variant_is_warmed_up_with_the_device_to_itself(bench_mod, tmp_path, monkeypatch):
    """Its first call picks a config by timing every one, and the job keeps that pick: beside other jobs' kernels (a
    shared hold) the pick is noise (0.093 vs 0.192 ms for one corpus kernel's initial in two jobs on the H200)."""
    bench_job, ceil = bench_mod
    phases = _record_phases(monkeypatch, bench_job)
    task = _task(tmp_path, "task.py", ROOT / "tests/cpu/verifier/tiny_axpy.py")
    tuned = tmp_path / "tuned.py"   # the regex reads the text: a decorator named in a comment is enough here
    tuned.write_text("# @triton.autotune(configs=[...], key=['n']) would be on its kernel\n" + task.read_text())
    variants = [{"id": "initial", "path": str(task)}, {"id": "tuned", "path": str(tuned)}]
    out = bench_job.bench({"task": str(task), "device": "cpu", "rounds": 1, "ceilings_file": str(ceil),
                           "variants": variants})
    assert set(out["shapes"][0]["variants"]) == {"initial", "tuned"}
    assert phases == ["exclusive", "exclusive"]
    assert bench_job.warmup_mode([str(task)]) == "shared" and bench_job.warmup_mode([str(task), str(tuned)]) == "exclusive"


def test_bench_names_the_variant_that_tampers(bench_mod, tmp_path):
    bench_job, ceil = bench_mod
    from tritondx.tools.exec.rejected import Rejected
    task = _task(tmp_path, "task.py", ROOT / "tests/cpu/verifier/tiny_axpy.py")
    cheat = _task(tmp_path, "cheat.py", ROOT / "tests/gpu/verifier/cheats/g10_flush_off_when_timed.py")
    import torch
    zero = torch.Tensor.zero_
    try:
        with pytest.raises(Rejected) as err:
            bench_job.bench({"task": str(task), "device": "cpu", "rounds": 8, "ceilings_file": str(ceil),
                              "variants": [{"id": "initial", "path": str(task)}, {"id": "cheat", "path": str(cheat)}]})
    finally:
        torch.Tensor.zero_ = zero
    assert err.value.klass == "timing_tampering"
    assert "variant cheat replaced torch.Tensor.zero_" in err.value.reason


def test_where_autotuners_time_their_configs_alone_the_warm_up_stays_shared(bench_mod, tmp_path):
    """With ``gpulock.autotune_exclusive`` in place the autotuners turn the hold exclusive themselves, wherever they
    are defined; the source's text decides only without it."""
    bench_job, _ = bench_mod
    tuned = tmp_path / "tuned.py"
    tuned.write_text("@triton.autotune(configs=[], key=['n'])\n")
    assert bench_job.warmup_mode([str(tuned)], True) == "shared"
    assert bench_job.warmup_mode([str(tuned)], False) == "exclusive"


def test_every_variants_pad_comes_from_the_initial_kernels_host_time(bench_mod, monkeypatch):
    """With ``pad_from`` the initial kernel's launcher, a variant that spends ten times longer on the host per call
    gets the initial's pad (1.5x its longest host time + 10 us), not one sized to its own host work: a launcher that
    computes on the host has that time timed. Without ``pad_from`` each function gets its own (the tuner's)."""
    bench_job, _ = bench_mod
    clock = [0.0]
    monkeypatch.setattr(bench_job, "_perf", lambda: clock[0])
    sleeps: list[int] = []
    monkeypatch.setattr(bench_job, "_sleep", lambda cycles: sleeps.append(cycles))
    timer = bench_job.Timer("cpu")
    timer.pad_host, timer._cycles_per_s = True, 1e9        # a spin cycle per ns

    def initial():
        clock[0] += 100e-6

    def host_heavy():
        clock[0] += 1000e-6

    timer.calls(initial, 3)
    assert sleeps == [160_000, 160_000]          # no pad before the first call; then 1.5 x 100 us + 10 us
    timer.pad_from = initial
    sleeps.clear()
    timer.calls(host_heavy, 3)
    assert sleeps == [160_000] * 3
    timer.pad_from = None
    sleeps.clear()
    timer.calls(host_heavy, 2)
    assert sleeps == [1_510_000, 1_510_000]      # its own: 1.5 x 1000 us + 10 us
    assert bench_job.Timer("cpu", pad_host=True).pad_host is False   # no spin kernel on the CPU


def test_torch_compiles_imports_come_before_the_warm_up_hold(bench_mod, tmp_path, monkeypatch):
    """A baselines job imports dynamo and inductor before it takes the device (they took ~6 s of an 8.5 s shared
    hold on the H100 host, every timer of the batch waiting), and its warm-up says what the hold went to."""
    bench_job, ceil = bench_mod
    phases = _record_phases(monkeypatch, bench_job)
    real = bench_job._compile_imports
    monkeypatch.setattr(bench_job, "_compile_imports", lambda: (phases.append("imports"), real())[1])
    monkeypatch.setattr(bench_job.torch, "compile", lambda fn, backend=None: fn)   # no inductor run on the CPU
    task = _task(tmp_path, "task.py", ROOT / "tests/cpu/verifier/tiny_axpy.py")
    out = bench_job.bench({"task": str(task), "device": "cpu", "rounds": 1, "ceilings_file": str(ceil),
                           "baselines": True, "variants": [{"id": "initial", "path": str(task)}]})
    assert phases == ["imports", "shared", "exclusive"], phases
    warm = out["shapes"][0]["warmup"]
    assert warm["mode"] == "shared" and warm["compile_imports_s"] >= 0 and warm["wall_s"] >= warm["inputs_s"]
    assert {"first_call_s:initial", "first_call_s:torch_eager", "first_call_s:torch_compile"} <= set(warm), warm
    assert set(out["shapes"][0]["variants"]) == {"initial", "torch_eager", "torch_compile"}


def test_a_reference_that_writes_into_its_inputs_is_timed_on_copies_of_them(bench_mod, tmp_path, monkeypatch):
    """``launch()`` must leave its inputs unchanged (a task that updates a buffer in place clones it first and pays
    for the copy); a reference that writes into an input does not. The torch baselines are timed under launch()'s
    contract, the inputs the reference writes copied in each call, and the inputs every variant runs on are the
    ones made, not ones the reference already updated."""
    bench_job, ceil = bench_mod
    monkeypatch.setattr(bench_job.torch, "compile", lambda fn, backend=None: fn)   # no inductor run on the CPU
    src = _task(tmp_path, "x.py", ROOT / "tests/cpu/verifier/tiny_axpy.py").read_text()
    # y += 2.5 * x in place, returned: each call of the reference moves y on; every input set starts with y[0] = 0
    # and x[0] = 1, so a reference called on a y it already updated (y[0] = 2.5) says so
    src = src.replace("def reference(x, y):\n    return 2.5 * x + y",
                      "def reference(x, y):\n    if y[0] != 0:\n        raise RuntimeError('y was updated before')\n"
                      "    y.add_(2.5 * x)\n    return y")
    src = src.replace("    return (x, y)\n", "    x[0], y[0] = 1.0, 0.0\n    return (x, y)\n")
    assert "y was updated before" in src and "x[0], y[0] = 1.0, 0.0" in src
    task = tmp_path / "task.py"
    task.write_text(src)
    out = bench_job.bench({"task": str(task), "device": "cpu", "rounds": 2, "ceilings_file": str(ceil),
                           "baselines": True, "variants": [{"id": "initial", "path": str(task)}]})
    entry = out["shapes"][0]
    assert entry["warmup"]["reference_writes_inputs"] == [1]
    # every baseline call ran on inputs it had not updated (an error would leave it out, named in "errors")
    assert set(entry["variants"]) == {"initial", "torch_eager", "torch_compile"}, entry["errors"]
    assert entry["variants"]["initial"]["outputs_checked"]["mismatch"] is None
