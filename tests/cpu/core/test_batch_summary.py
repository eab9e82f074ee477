"""Batch aggregation: the figures the summary reports, computed from per-task entries."""

import json

from tritondx.batch_summary import aggregate, geomean, write_summary


def _entry(name, t0, t1, compile_ms=None, by_tier=None):
    return {"task": name, "status": "done", "wall_s": 10.0, "initial_ms": t0, "optimized_ms": t1,
            "speedup": t0 / t1, "roofline_before": 0.2, "roofline_after": 0.8, "torch_compile_ms": compile_ms,
            "torch_eager_ms": None,
            "cost": {"device:jobs": 5.0, "device:held": 2.0, "analysis": 1.0, "phase:verify": 4.0, "wall": 10.0,
                     "cpu:self": 3.0, "cpu:children": 6.0, "cpu:live": 1.0},
            "best_by_tier": by_tier or {"triage": t0 / t1, "profile": t0 / t1, "ir": t0 / t1, "compiler": t0 / t1}}


def test_aggregate_figures(tmp_path):
    rs = [_entry("a", 10, 1, compile_ms=2), _entry("b", 3, 1, compile_ms=0.5), _entry("c", 1.5, 1),
          {"task": "d", "status": "failed", "wall_s": 1.0}]
    agg = aggregate(rs)
    assert agg["measured"] == 3 and agg["failed"] == 1
    assert abs(agg["geomean_speedup"] - (10 * 3 * 1.5) ** (1 / 3)) < 1e-9
    assert agg["median_speedup"] == 3 and agg["over_2x"] == 2 and agg["over_5x"] == 1
    assert abs(agg["geomean_vs_torch_compile"] - geomean([2.0, 0.5])) < 1e-9
    write_summary(tmp_path, rs, {"suite": "s"})
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["aggregate"]["over_5x"] == 1
    summary = (tmp_path / "summary.md").read_text()
    assert "geomean speedup: **" in summary
    # the tasks' cost ledgers summed key by key; the summary's lines read the sum
    cost = data["aggregate"]["cost"]
    assert cost["device:jobs"] == 15.0 and cost["device:held"] == 6.0 and cost["analysis"] == 3.0
    assert cost["phase:verify"] == 12.0 and cost["wall"] == 30.0 and cost["cpu:children"] == 18.0
    assert data["aggregate"]["median_cpu_s"] == 10.0
    assert "device-job seconds in all: 15, of which holding the device: 6" in summary
    assert "| verify | 12.0 |" in summary
    for old in ("gpu_seconds", "device_seconds", "analysis_seconds", "phase_seconds"):
        assert old not in data["aggregate"], old


def test_a_task_measured_without_a_roofline_or_torch_times_is_still_summarized(tmp_path):
    """A task whose speedup is its run's own figure and whose baselines job the deadline stopped has no roofline and
    no torch times (H100 corpus batch of 2026-12-05, batch_g: the summary's last write raised on it)."""
    e = {**_entry("a", 2.0, 1.0), "roofline_before": None, "roofline_after": None, "initial_ms": None,
         "optimized_ms": None}
    write_summary(tmp_path, [e, _entry("b", 3, 1, compile_ms=0.5)], {"suite": "s"})
    summary = (tmp_path / "summary.md").read_text()
    assert "| a | - | - | - | 2.00x | - -> - |" in summary and "| b |" in summary


def test_geomean_ignores_missing():
    assert geomean([]) is None and geomean([None, 4.0, 1.0]) == 2.0


def test_a_shuffled_batch_starts_its_costly_tasks_first(tmp_path):
    """``shuffled``: a fixed pseudo-random order, with the tasks whose source says they are costly (a ``tl.dot``
    kernel, an autotuner's configs) first; a plain task costs 1.0 and an unreadable path too."""
    from tritondx.batch import expected_cost
    plain = tmp_path / "plain.py"
    plain.write_text("@triton.jit\ndef k(x, BLOCK: tl.constexpr):\n    tl.store(x, tl.load(x))\n")
    dot = tmp_path / "dot.py"
    dot.write_text("@triton.jit\ndef k(a, b):\n    acc = tl.dot(a, b)\n")
    tuned = tmp_path / "tuned.py"
    tuned.write_text("@triton.autotune(configs=[" + "triton.Config({'B': 64}), " * 24 + "], key=['n'])\n")
    assert expected_cost(str(plain)) == 1.0 == expected_cost(str(tmp_path / "missing.py"))
    assert expected_cost(str(dot)) == 2.0 and expected_cost(str(tuned)) == 3.0
    from tritondx.batch import shuffled
    more = [tmp_path / f"plain{i}.py" for i in range(6)]
    for m in more:
        m.write_text(plain.read_text())
    order = [p.split("/")[-1][:-3] for p in shuffled([str(p) for p in (*more, plain, dot, tuned)])]
    assert order[:2] == ["tuned", "dot"] and sorted(order[2:]) == sorted(["plain", *(m.stem for m in more)])
    assert order == [p.split("/")[-1][:-3] for p in shuffled([str(p) for p in (dot, *more, tuned, plain)])]
