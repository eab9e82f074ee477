"""NpuRuntime without an NPU: availability, skip behaviour, command building, msprof parsing."""

import sys
import types
from pathlib import Path

import pytest
from tritondx.errors import BackendUnavailable
from tritondx.tools.npu import runtime as rt
from tritondx.tools.npu.runtime import (
    NpuRuntime,
    find_op_summary,
    parse_op_summary,
    summarize_op_rows,
    timing_from_samples,
)

SAMPLE = Path(__file__).parent / "data" / "op_summary_sample.csv"


def test_module_says_it_is_untested_on_hardware():
    assert rt.__doc__.startswith("npu runtime: untested on hardware")
    for name in ("device_info", "synchronize", "bench", "bench_events", "run_msprof"):
        assert "Needs an NPU" in getattr(NpuRuntime, name).__doc__


def test_no_npu_here():
    r = NpuRuntime()
    assert r.device == "npu:0" and NpuRuntime(3).device == "npu:3"
    assert not r.is_available()
    reason = r.unavailable_reason()
    assert reason and "\n" not in reason
    with pytest.raises(BackendUnavailable, match="^npu: "):
        r.require()
    with pytest.raises(BackendUnavailable):
        r.bench(lambda: None)
    with pytest.raises(BackendUnavailable):
        r.device_info()


def test_fake_torch_npu_without_device(monkeypatch):
    fake_torch = types.SimpleNamespace(npu=types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0))
    monkeypatch.setattr(rt, "_import_torch_npu", lambda: (fake_torch, types.ModuleType("torch_npu")))
    r = NpuRuntime()
    assert NpuRuntime.torch_npu_importable()
    assert not r.is_available()
    assert "is_available() is False" in r.unavailable_reason()


def test_bench_events_with_a_fake_device(monkeypatch):
    class Event:
        clock = [0.0]

        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            Event.clock[0] += 0.5
            self.t = Event.clock[0]

        def elapsed_time(self, other):
            return other.t - self.t

    npu = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1, Event=Event,
                                synchronize=lambda *a: None)
    monkeypatch.setattr(rt, "_import_torch_npu", lambda: (types.SimpleNamespace(npu=npu), object()))
    monkeypatch.setattr(NpuRuntime, "_do_bench_npu", staticmethod(lambda: None))
    calls = []
    res = NpuRuntime().bench(lambda: calls.append(1), warmup=2, rep=5)
    assert res.method == "npu_event" and res.ms == pytest.approx(0.5) and len(res.samples) == 5
    assert len(calls) == 7


def test_bench_prefers_do_bench_npu(monkeypatch):
    npu = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1)
    monkeypatch.setattr(rt, "_import_torch_npu", lambda: (types.SimpleNamespace(npu=npu), object()))
    seen = {}

    def fake_do_bench_npu(fn, warmup, active):
        seen.update(warmup=warmup, active=active)
        return 250.0  # microseconds, as triton-ascend returns it

    monkeypatch.setattr(NpuRuntime, "_do_bench_npu", staticmethod(lambda: fake_do_bench_npu))
    res = NpuRuntime().bench(lambda: None, warmup=1, rep=10)
    assert res.method == "do_bench_npu" and res.ms == pytest.approx(0.25)
    assert seen == {"warmup": 5, "active": 30}


def test_msprof_command_lines(tmp_path):
    r = NpuRuntime()
    cmd = r.msprof_op_command([sys.executable, "run.py", "--n", "4"], tmp_path, kernel_name="gather_kernel",
                              launch_count=3, warm_up=2, aic_metrics="PipeUtilization")
    assert cmd[:3] == ["msprof", "op", f"--output={tmp_path}"]
    assert "--kernel-name=gather_kernel" in cmd and "--launch-count=3" in cmd and "--warm-up=2" in cmd
    assert "--aic-metrics=PipeUtilization" in cmd and cmd[-4:] == [sys.executable, "run.py", "--n", "4"]
    sys_cmd = r.msprof_command(["./app"], tmp_path, aic_metrics="Memory")
    assert sys_cmd == ["msprof", f"--output={tmp_path}", "--aic-metrics=Memory", "./app"]
    with pytest.raises(ValueError):
        r.msprof_op_command([], tmp_path)
    with pytest.raises(ValueError):
        r.msprof_op_command(["./app"], tmp_path, launch_count=0)


def test_parse_op_summary_sample():
    rows = parse_op_summary(SAMPLE)
    assert [r.op_name for r in rows][:3] == ["gather_kernel", "gather_kernel", "scale_kernel"]
    g = rows[0]
    assert g.task_type == "AI_VECTOR_CORE" and g.block_dim == 4 and g.mix_block_dim == 0
    assert g.task_duration_us == pytest.approx(412.38) and g.aiv_time_us == pytest.approx(409.87)
    assert g.aiv_scalar_ratio == pytest.approx(0.928) and g.aiv_vec_ratio == pytest.approx(0.008)
    assert g.raw["Input Data Types"].startswith('"FLOAT;INT64')
    zeros = rows[3]
    assert zeros.aiv_mte2_ratio is None                   # N/A cells become None
    dot = rows[4]
    assert dot.task_type == "MIX_AIC" and dot.mix_block_dim == 40 and dot.aic_mac_ratio == pytest.approx(0.23)
    s = summarize_op_rows(rows, "gather_kernel")
    assert s["count"] == 2 and s["block_dim"] == 4
    assert s["task_duration_us_mean"] == pytest.approx((412.38 + 409.91) / 2)


def test_parse_rejects_other_csv_and_finds_newest(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="Op Name"):
        parse_op_summary(bad)
    out = tmp_path / "PROF_000001_20250101" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    target = out / "op_summary_20250101.csv"
    target.write_bytes(SAMPLE.read_bytes())
    assert find_op_summary(tmp_path) == target
    assert find_op_summary(tmp_path / "PROF_000001_20250101" / "none") is None


def test_timing_from_samples():
    res = timing_from_samples([3.0, 1.0, 2.0, 4.0, 5.0], "npu_event")
    assert res.ms == 3.0 and res.quantiles["p20"] == pytest.approx(1.8)
    with pytest.raises(ValueError):
        timing_from_samples([], "npu_event")
