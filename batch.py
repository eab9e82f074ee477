"""Headless batch: optimize every task in a folder, resumably, and report like the paper.

Each task runs as its own ``tritondx optimize`` process (its own run folder and checkpoint
database), several at once; on a GPU, timing holds the device exclusively (tools/exec/gpulock.py) so
concurrent tasks never disturb a measurement. ``results.json`` is rewritten atomically after every
task: a batch killed at any point (even kill -9) resumes without redoing a finished task.
On a backend that times, each task's **baselines job** (torch eager and torch.compile beside the initial
kernel, side by side) runs beside its optimize run where the host has cores to spare (``baselines_start``),
so torch.compile's compile (15-52 s per task on the H200) is off the task's critical path, else after the
run beside its final bench; the **final bench** times the best kernel against the initial one, side by
side, without torch baselines. Speedups come from the final bench;
best vs torch is derived through the initial kernel (``derived_vs_torch``) and labelled so
(``measured_how``); ``timing`` says how much of the baselines job overlapped the run and how long the task
waited for it.

Scale:

- several local GPUs (backend cuda, N > 1 visible: ``$CUDA_VISIBLE_DEVICES`` or ``nvidia-smi -L``): each
  task process is pinned to one GPU (``CUDA_VISIBLE_DEVICES=<id>``) with that GPU's own lock folder
  (``<out>/locks/gpu<id>``), ``--workers`` tasks at once per GPU; a task takes whichever GPU frees up
  first. One GPU (or none) behaves as before: ``--workers`` tasks at once, one lock folder.
  ``TRITONDX_FAKE_GPUS=N`` pretends N GPUs for tests (any backend).
- ``--ray-address ADDR|auto|local``: one Ray task per kernel task (``num_gpus=1/workers`` on cuda, 0
  otherwise), the same task process run inside it; the driver writes ``results.json`` as each one
  finishes, so a killed batch resumes exactly like a local one. Run folders are written where the
  Ray task runs: give ``--out`` on a filesystem every node shares (and/or ``--checkpoint-url``).
- ``--checkpoint-url postgresql://...``: every task's checkpoints in that database (``checkpoints.py``);
  the URL reaches task processes through the environment, never their command line.
"""

from __future__ import annotations

import json
import math
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from tritondx.tools.records.evidence import TIERS

log = structlog.get_logger(__name__)


def _atomic_write(path: Path, data: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


#: the PyTorch baselines a bench job times when asked (tools/bench/bench.py ``_prepare_shape``)
TORCH_BASELINES = ("torch_eager", "torch_compile")
#: how each ratio of a task was measured (results.json ``measured_how``, summary.md)
SIDE_BY_SIDE_FINAL = "side by side in the final bench job (best vs initial; no torch baselines in it)"
SIDE_BY_SIDE_BASELINES = "side by side in the baselines job (torch vs initial; a job of its own)"
DERIVED = ("derived through the initial kernel: (torch / initial, baselines job) x (initial / best, final bench "
           "job), per shape, geomean over shapes")
NO_BEST = "side by side in the baselines job (the best kernel is the initial one)"


def _final_bench(task: str, best_path: str | None, backend_name: str, rounds: int,
                 baselines: bool = False) -> dict[str, Any] | None:
    """One side-by-side bench job of the batch: the initial kernel, the best one (when given) and, with
    ``baselines``, torch eager and torch.compile. The final bench after a run asks for no baselines (its
    torch.compile compile was 15-52 s per task on the H200); the baselines job (``BaselinesJob``) asks for
    them and times only the user's original task."""
    from tritondx.tools.backends.base import get_backend
    from tritondx.tools.verify.api import bench_variants
    backend = get_backend(backend_name)
    if not backend.can_time:
        return None
    variants = [{"id": "initial", "path": task}]
    if best_path and Path(best_path).exists():
        variants.append({"id": "best", "path": best_path})
    result, error, seconds = bench_variants(task, variants, backend, rounds=rounds, baselines=baselines)
    if result is None:
        return {"error": error, "seconds": seconds, "baselines": baselines}
    out: dict[str, Any] = {"seconds": seconds, "device_seconds": result.get("device_seconds"),
                           "baselines": baselines, "shapes": []}
    for e in result["shapes"]:
        out["shapes"].append({"shape": e["shape"], "dtype": e["dtype"], "floor_ms": e["floor_ms"],
                              **{vid: {"median_ms": v["median_ms"], "spread": v["spread"],
                                       "roofline_fraction": v["roofline_fraction"]}
                                 for vid, v in e["variants"].items()}, "errors": e["errors"]})
    return out


def _per_variant_geo(final: dict[str, Any], vid: str, key: str = "median_ms") -> float | None:
    vals = [s[vid][key] for s in final.get("shapes", []) if vid in s and s[vid].get(key)]
    return geomean(vals)


def _shape_key(s: dict[str, Any]) -> tuple[str, str]:
    return json.dumps(s["shape"]), s["dtype"]


def derived_vs_torch(final: dict[str, Any], base: dict[str, Any], torch_vid: str) -> float | None:
    """How much faster the best kernel is than a torch baseline (>1: faster), when the two were timed in
    different jobs: per shape (torch / initial in the baselines job) x (initial / best in the final bench),
    geomean over the shapes both jobs timed. Each factor is a side-by-side ratio in one job, so a drift of
    the device between the jobs (clocks, load) cancels; absolute times from two jobs would not."""
    fin = {_shape_key(s): s for s in final.get("shapes", [])}
    ratios = []
    for s in base.get("shapes", []):
        f = fin.get(_shape_key(s))
        if not f or not all((x.get(k) or {}).get("median_ms") for x, k in
                             ((s, torch_vid), (s, "initial"), (f, "initial"), (f, "best"))):
            continue
        ratios.append(s[torch_vid]["median_ms"] / s["initial"]["median_ms"]
                      * f["initial"]["median_ms"] / f["best"]["median_ms"])
    return geomean(ratios)


def _direct_vs_torch(base: dict[str, Any], torch_vid: str) -> float | None:
    """torch / initial side by side in one job (the best kernel is the initial one), geomean over shapes."""
    return geomean([s[torch_vid]["median_ms"] / s["initial"]["median_ms"] for s in base.get("shapes", [])
                    if (s.get(torch_vid) or {}).get("median_ms") and (s.get("initial") or {}).get("median_ms")])


def _speed_fields(final: dict[str, Any] | None, base: dict[str, Any] | None) -> dict[str, Any]:
    """The measured fields of a task from its final bench (best vs initial) and its baselines job (torch vs
    initial), each ratio labelled with how it was measured (``measured_how``). An older final bench that
    timed everything in one job (``torch_*`` beside best) is read as before."""
    ok_final = final if final and "shapes" in final else None
    ok_base = base if base and "shapes" in base else None
    if ok_final is None and ok_base is None:
        return {}
    if final is not None and ok_final is None:  # best vs initial was asked for and failed: no speedup at all
        return {"baselines_bench": ok_base} if ok_base else {}
    one_job = ok_final is not None and any(v in s for s in ok_final["shapes"] for v in TORCH_BASELINES)
    has_best = ok_final is not None and any("best" in s for s in ok_final["shapes"])
    speed = ok_final or ok_base
    t0 = _per_variant_geo(speed, "initial")
    tb = _per_variant_geo(speed, "best") if has_best else t0
    out: dict[str, Any] = {
        "initial_ms": t0, "optimized_ms": tb, "speedup": (t0 / tb) if t0 and tb else None,
        "roofline_before": _per_variant_geo(speed, "initial", "roofline_fraction"),
        "roofline_after": (_per_variant_geo(speed, "best", "roofline_fraction") if has_best else None)
        or _per_variant_geo(speed, "initial", "roofline_fraction"),
        "measured_how": {"speedup": SIDE_BY_SIDE_FINAL if has_best else
                         f"1 by definition (no kernel beat the initial one); initial timed in the "
                         f"{'final bench' if ok_final else 'baselines'} job"}}
    if ok_final is not None:
        out["final_bench"] = ok_final
    torch_src = ok_final if one_job else ok_base
    if torch_src is None:
        return out
    out.update({"torch_eager_ms": _per_variant_geo(torch_src, "torch_eager"),
                "torch_compile_ms": _per_variant_geo(torch_src, "torch_compile")})
    if one_job:  # everything side by side in one job (batches before the baselines job)
        out["measured_how"]["torch"] = "side by side in the final bench job (with best and initial)"
        return out
    out["baselines_bench"] = ok_base
    out["baselines_initial_ms"] = _per_variant_geo(ok_base, "initial")
    out["measured_how"]["torch"] = SIDE_BY_SIDE_BASELINES
    derive = has_best and ok_final is not None
    for vid, key in (("torch_eager", "vs_torch_eager"), ("torch_compile", "vs_torch_compile")):
        out[key] = derived_vs_torch(ok_final, ok_base, vid) if derive else _direct_vs_torch(ok_base, vid)
    out["measured_how"]["vs_torch"] = DERIVED if derive else NO_BEST
    if ok_final is not None and out["baselines_initial_ms"] and t0:
        # the same kernel timed in both jobs: how far apart two jobs' absolute times are on this device
        out["initial_ms_ratio"] = t0 / out["baselines_initial_ms"]
    return out


def summarize_task(task: str, run_dir: Path, rc: int, wall: float, final: dict[str, Any] | None,
                   stderr: str, base: dict[str, Any] | None = None,
                   timing: "TaskTiming | None" = None) -> dict[str, Any]:
    """A task's results.json entry: the run's report, the final bench (best vs initial) and the baselines
    job (torch eager / torch.compile vs initial), and where its wall time went (``timing``)."""
    entry: dict[str, Any] = {"task": Path(task).stem, "path": task, "exit": rc, "wall_s": wall,
                             "status": "done" if rc == 0 else "failed", "stderr_tail": stderr[-800:]}
    rep = run_dir / "report.json"
    if rep.exists():
        r = json.loads(rep.read_text())
        entry.update({"kernel_class": r["kernel_class"], "tiers_used": r["tiers_used"], "rounds": r["rounds"],
                      "gpu_seconds": r["gpu_seconds"], "device_seconds": r.get("device_seconds"),
                      "run_speedup": r.get("speedup"),
                      "best_family": (r.get("best") or {}).get("family"),
                      "rewrites_applied": _lineage(r), "speed": r["speed"],
                      "analysis_seconds": r.get("analysis_seconds"), "node_seconds": r.get("node_seconds"),
                      "phase_seconds": r.get("phase_seconds"), "cpu_seconds": r.get("cpu_seconds")})
        cands = [c for c in r["candidates"] if c.get("measurement")]
        # per-tier ablation: best measured speedup using evidence up to each tier
        entry["best_by_tier"] = {t: max([1.0] + [c["measurement"]["speedup"] for c in cands
                                                 if TIERS.index(c["tier"]) <= TIERS.index(t) and c["verified"]])
                                 for t in TIERS}
        entry["candidates"] = len(r["candidates"])
        entry["rejected"] = sum(1 for c in r["candidates"] if c["verified"] is False)
    extra_phases = {}
    if final and final.get("seconds"):  # the final bench is the batch's, after the run
        extra_phases["final_bench"] = round(final["seconds"], 3)
    if base and base.get("seconds"):  # the baselines job ran beside the run (timing says how much overlapped)
        extra_phases["baselines"] = round(base["seconds"], 3)
    if extra_phases:
        entry["phase_seconds"] = {**(entry.get("phase_seconds") or {}), **extra_phases}
    entry.update(_speed_fields(final, base))
    if final and "shapes" not in final:
        entry["final_bench_error"] = final.get("error")
    if base and "shapes" not in base:
        entry["baselines_error"] = base.get("error")
    if timing is not None:
        entry["timing"] = timing.model_dump()
        entry["wall_without_baselines_s"] = timing.wall_without_baselines_s
    return entry


def _lineage(report: dict[str, Any]) -> list[str]:
    cands = {c["id"]: c for c in report["candidates"]}
    out, cur = [], (report.get("best") or {}).get("id")
    while cur in cands:
        out.append(cands[cur]["family"])
        cur = cands[cur]["parent"]
    return list(reversed(out))


def _vs_torch(r: dict[str, Any], vid: str) -> float | None:
    """Best vs a torch baseline for one task (>1: faster): its ratio as measured (``vs_torch_*``: derived
    through the initial kernel, or side by side), else (entries of older batches, all timed in one job) the
    ratio of the absolute times."""
    if (r.get("measured_how") or {}).get("vs_torch"):
        return r.get(f"vs_{vid}")  # None where no shape was timed in both jobs: left out, never divided across
    return r[f"{vid}_ms"] / r["optimized_ms"]


def _baselines_aggregate(done: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    """What the baselines jobs cost the batch and how far the two jobs' timings of the initial kernel agree:
    seconds in all, of which overlapped with the runs and waited for; median wall per task with and without
    the wait; geomean and worst ratio of the initial kernel's time in the final bench over the baselines job."""
    tms = [r["timing"] for r in results if r.get("timing")]
    if not tms:
        return {}
    out: dict[str, Any] = {"baselines": {k: round(sum(t.get(k, 0.0) for t in tms), 3) for k in
                                         ("baselines_s", "baselines_overlapped_s", "baselines_wait_s",
                                          "baselines_after_s")}}
    walls = [r["timing"]["wall_without_baselines_s"] for r in done if r.get("timing")]
    if walls:
        out["median_wall_without_baselines_s"] = statistics.median(walls)
    ratios = [r["initial_ms_ratio"] for r in done if r.get("initial_ms_ratio")]
    if ratios:
        out["initial_ms_ratio"] = {"geomean": geomean(ratios), "worst": max(ratios, key=lambda x: abs(math.log(x))),
                                   "tasks": len(ratios)}
    return out


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in results if r.get("speedup")]
    sp = [r["speedup"] for r in done]
    agg: dict[str, Any] = {"tasks": len(results), "measured": len(done),
                           "failed": sum(1 for r in results if r["status"] not in ("done", "not_finished")),
                           "not_finished": sum(1 for r in results if r["status"] == "not_finished")}
    if sp:
        agg.update({"geomean_speedup": geomean(sp), "median_speedup": statistics.median(sp),
                    "over_2x": sum(1 for s in sp if s > 2), "over_5x": sum(1 for s in sp if s > 5),
                    "roofline_after_geomean": geomean([r["roofline_after"] for r in done if r.get("roofline_after")]),
                    "roofline_before_geomean": geomean([r["roofline_before"] for r in done
                                                        if r.get("roofline_before")]),
                    "median_wall_s": statistics.median([r["wall_s"] for r in done])})
        both = [r for r in done if r.get("torch_compile_ms") and r.get("optimized_ms")]
        if both:
            agg["geomean_optimized_ms"] = geomean([r["optimized_ms"] for r in both])
            agg["geomean_torch_compile_ms"] = geomean([r["torch_compile_ms"] for r in both])
            agg["geomean_vs_torch_compile"] = geomean([_vs_torch(r, "torch_compile") for r in both])
        eager = [r for r in done if r.get("torch_eager_ms") and r.get("optimized_ms")]
        if eager:
            agg["geomean_vs_torch_eager"] = geomean([_vs_torch(r, "torch_eager") for r in eager])
        if both or eager:
            agg["vs_torch_derived"] = sum(1 for r in {id(r): r for r in both + eager}.values()
                                          if (r.get("measured_how") or {}).get("vs_torch") == DERIVED)
        agg.update(_baselines_aggregate(done, results))
        agg["ablation_geomean_by_tier"] = {t: geomean([r["best_by_tier"][t] for r in done if "best_by_tier" in r])
                                           for t in TIERS}
        agg["gpu_seconds"] = sum(r.get("gpu_seconds") or 0 for r in results)
        agg["device_seconds"] = sum(r.get("device_seconds") or 0 for r in results)
        agg["analysis_seconds"] = sum(r.get("analysis_seconds") or 0 for r in results)
        cpu = [sum((r.get("cpu_seconds") or {}).values()) for r in done if r.get("cpu_seconds")]
        if cpu:
            agg["median_cpu_s"] = statistics.median(cpu)
    phases: dict[str, float] = {}
    for r in results:
        for k, v in (r.get("phase_seconds") or {}).items():
            phases[k] = round(phases.get(k, 0.0) + v, 3)
    if phases:
        agg["phase_seconds"] = phases
    return agg


def device_held_line(h: dict[str, Any]) -> str:
    """One line: how much of the batch's wall time the device was held (tools/exec/gpulock.HeldSampler)."""
    gpus = f" x{h['devices']} devices" if h.get("devices", 1) > 1 else ""
    return (f"device held {h['held_s']:.0f} s of {h['wall_s']:.0f} s wall{gpus} ({h['held_fraction']:.0%}); "
            f"of which exclusive (timing) {h['exclusive_s']:.0f} s")


def baselines_line(agg: dict[str, Any]) -> str:
    """One line: what the baselines jobs (torch eager + torch.compile) cost, and how much of it the tasks
    waited for (the rest overlapped their runs)."""
    b = agg["baselines"]
    line = (f"baselines jobs (torch eager + torch.compile, jobs of their own): {b['baselines_s']:.0f} s in all, "
            f"{b['baselines_overlapped_s']:.0f} s overlapped with the runs or final benches, "
            f"{b['baselines_wait_s']:.0f} s waited for after them")
    if b.get("baselines_after_s"):
        line += f", {b['baselines_after_s']:.0f} s after the tasks' ends, their workers on the next tasks"
    if agg.get("median_wall_s") and agg.get("median_wall_without_baselines_s") is not None:
        line += (f"; median wall per task {agg['median_wall_s']:.0f} s, "
                 f"{agg['median_wall_without_baselines_s']:.0f} s without that wait")
    return line


def _how_measured_lines(agg: dict[str, Any]) -> list[str]:
    """How the torch ratios were measured: derived through the initial kernel (two jobs) or side by side,
    and how well the two jobs' timings of the same initial kernel agree (what a derived ratio can be off by)."""
    lines = []
    n = agg.get("vs_torch_derived")
    if n:
        lines.append(f"  - vs torch: {n} task(s) derived through the initial kernel (torch / initial side by side "
                     "in the baselines job x initial / optimized side by side in the final bench), the rest "
                     "side by side in one job")
    ir = agg.get("initial_ms_ratio")
    if ir:
        lines.append(f"  - the initial kernel timed in both jobs (final bench / baselines job): geomean "
                     f"{ir['geomean']:.3f}, worst {ir['worst']:.3f} over {ir['tasks']} task(s)")
    return lines


def _unmeasured(r: dict[str, Any]) -> str:
    """The speedup cell of a task without a measured speedup: why (a finished run on a backend that
    measures no speed says so, not "done")."""
    from tritondx.tools.report.text import unmeasured_cell
    return unmeasured_cell(r)


def write_summary(out: Path, results: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    agg = aggregate(results)
    if meta.get("device_held"):
        agg["device_held"] = meta["device_held"]
    _atomic_write(out / "results.json", json.dumps({"meta": meta, "aggregate": agg, "results": results},
                                                   indent=1, default=str))
    lines = [f"# tritondx batch: {meta.get('suite')}", "",
             f"device: {meta.get('device')}; torch {meta.get('torch')}; triton {meta.get('triton')}; "
             f"date {meta.get('date')}", ""]
    if agg.get("geomean_speedup"):
        lines += [f"- tasks: {agg['tasks']} (measured {agg['measured']}, failed {agg['failed']}"
                  + (f", not finished by the deadline {agg['not_finished']}" if agg.get("not_finished") else "") + ")",
                  f"- geomean speedup: **{agg['geomean_speedup']:.2f}x**, median {agg['median_speedup']:.2f}x",
                  f"- over 2x: {agg['over_2x']}/{agg['measured']}; over 5x: {agg['over_5x']}/{agg['measured']}",
                  f"- roofline fraction (geomean): before {agg['roofline_before_geomean']:.0%}, "
                  f"after {agg['roofline_after_geomean']:.0%}"]
        if agg.get("geomean_vs_torch_compile"):
            lines.append(f"- optimized vs torch.compile: {agg['geomean_vs_torch_compile']:.2f}x (geomean of "
                         "compile time / optimized time; >1 means faster than torch.compile)")
        if agg.get("geomean_vs_torch_eager"):
            lines.append(f"- optimized vs torch eager: {agg['geomean_vs_torch_eager']:.2f}x")
        lines += _how_measured_lines(agg)
        lines.append(f"- median wall per task: {agg['median_wall_s']:.0f} s; device-job seconds in all: "
                     f"{agg['gpu_seconds']:.0f}" + (f", of which holding the device: {agg['device_seconds']:.0f}"
                                                     if agg.get("device_seconds") else ""))
        lines.append("- ablation (geomean when stopping after each tier): " + ", ".join(
            f"{t} {v:.2f}x" for t, v in agg["ablation_geomean_by_tier"].items() if v))
    if meta.get("device_held"):
        lines.append("- " + device_held_line(meta["device_held"]))
    if meta.get("host_cpu"):
        from tritondx.tools.run.host import host_cpu_line
        lines.append("- " + host_cpu_line(meta["host_cpu"]) + (
            f"; median CPU-s per finished task (its run and jobs) {agg['median_cpu_s']:.0f}"
            if agg.get("median_cpu_s") else ""))
    if agg.get("baselines"):
        lines.append("- " + baselines_line(agg))
    if agg.get("phase_seconds"):
        lines += ["", "## Where the time went (all tasks, wall seconds per phase)", ""] + _phase_table(agg)
    lines += ["", "| task | class | initial (us) | optimized (us) | speedup | roofline before -> after | "
                  "eager (us) | compile (us) | tiers | rewrites | wall (s) |", "|" + "---|" * 11]
    for r in sorted(results, key=lambda r: r["task"]):
        def us(x):
            return f"{x * 1e3:.1f}" if x else "-"
        rb, ra = r.get("roofline_before"), r.get("roofline_after")
        lines.append(f"| {r['task']} | {r.get('kernel_class', '-')} | {us(r.get('initial_ms'))} | "
                     f"{us(r.get('optimized_ms'))} | {r['speedup']:.2f}x | " if r.get("speedup") else
                     f"| {r['task']} | {r.get('kernel_class', '-')} | - | - | {_unmeasured(r)} | ")
        if r.get("speedup"):
            lines[-1] += (f"{rb:.0%} -> {ra:.0%} | {us(r.get('torch_eager_ms'))} | {us(r.get('torch_compile_ms'))} | "
                          f"{','.join(r.get('tiers_used', []))} | {'+'.join(r.get('rewrites_applied', [])) or '-'} | "
                          f"{r['wall_s']:.0f} |")
        else:
            lines[-1] += f"- | - | - | {','.join(r.get('tiers_used', []))} | - | {r['wall_s']:.0f} |"
    if any(r.get("baselines_bench") for r in results):
        lines += ["", "eager and compile: absolute times from each task's baselines job (torch beside the initial "
                      "kernel); initial and optimized: from its final bench (best beside the initial kernel). The "
                      "ratios vs torch above are derived through the initial kernel, not divided across the columns."]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(out, results)
    from tritondx.tools.report.html import write_batch_html
    write_batch_html(out, results, agg, meta)  # report.html: one self-contained page with the plots
    return agg


def _phase_table(agg: dict[str, Any]) -> list[str]:
    """The phase table; the baselines jobs ran beside the runs, so they get a row of their own after the
    table, outside the shares (which are of the tasks' own phases)."""
    from tritondx.tools.run.phases import table_md
    ph = dict(agg["phase_seconds"])
    overlapped = ph.pop("baselines", None) if agg.get("baselines") else None
    lines = table_md(ph)
    if overlapped is not None:
        b = agg["baselines"]
        lines.append(f"| baselines (jobs of their own: {b['baselines_overlapped_s']:.0f} s overlapped, "
                     f"{b['baselines_wait_s']:.0f} s waited for) | {overlapped:.1f} | - |")
    return lines


def _plot(out: Path, results: list[dict[str, Any]]) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    sp = sorted((r["speedup"], r["task"]) for r in results if r.get("speedup"))
    if not sp:
        return
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar(range(len(sp)), [s for s, _ in sp], color=["#2a7" if s > 2 else "#999" for s, _ in sp])
    ax.set_yscale("log")
    ax.axhline(1, color="k", lw=0.5)
    ax.axhline(2, color="#2a7", lw=0.5, ls="--")
    ax.axhline(5, color="#c33", lw=0.5, ls="--")
    ax.set_xticks(range(len(sp)))
    ax.set_xticklabels([t for _, t in sp], rotation=90, fontsize=6)
    ax.set_ylabel("speedup over initial (log)")
    ax.set_title("tritondx: speedup per task")
    fig.tight_layout()
    fig.savefig(out / "speedups.png", dpi=120)
    plt.close(fig)


def _earlier_run(run_dir: Path, checkpoint_url: str | None = None) -> str | None:
    """What a previous, killed batch left in ``run_dir``: "finished" (report written), "interrupted"
    (checkpoints to resume from) or None (nothing usable)."""
    if (run_dir / "report.json").exists():
        return "finished"
    from tritondx.checkpoints import MARKER_FILE, count_checkpoints
    n = count_checkpoints(run_dir, checkpoint_url)
    if n is None and (run_dir / MARKER_FILE).exists() and (run_dir / "run.json").exists():
        # checkpoints in PostgreSQL that cannot be read right now (server down, no password): never wipe
        # the folder; `resume` says what is wrong and a later batch tries again
        return "interrupted"
    return "interrupted" if n else None


# ---------------------------------------------------------------------------------------------------
# GPUs and slots

FAKE_GPUS_ENV = "TRITONDX_FAKE_GPUS"


def visible_gpus(backend_name: str) -> list[str]:
    """The GPU ids task processes can be pinned to: ``$TRITONDX_FAKE_GPUS`` (a count, tests), else on cuda
    the ids in ``$CUDA_VISIBLE_DEVICES`` or the ``GPU n:`` lines of ``nvidia-smi -L`` (no CUDA context
    is created in this process), else none."""
    fake = os.environ.get(FAKE_GPUS_ENV, "").strip()
    if fake:
        return [str(i) for i in range(int(fake))]
    if backend_name != "cuda":
        return []
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        ids = []
        for x in cvd.split(","):
            x = x.strip()
            if not x or x.startswith("-"):  # CUDA stops at the first invalid entry
                break
            ids.append(x)
        return ids
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        r = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    import re
    return [m.group(1) for m in re.finditer(r"^GPU (\d+):", r.stdout, re.M)] if r.returncode == 0 else []


def plan_slots(gpus: list[str], workers: int, out_dir: Path) -> list[dict[str, str]]:
    """One environment overlay per concurrent task: ``workers`` per GPU when there are several GPUs (each
    GPU's own lock folder), else ``workers`` sharing the batch's one lock folder (the single-GPU batch)."""
    workers = max(1, workers)
    caller = os.environ.get("TRITONDX_LOCK_DIR")  # a caller's lock folder is shared with its other work
    if len(gpus) <= 1:
        return [{"TRITONDX_LOCK_DIR": caller or str(out_dir / ".locks")} for _ in range(workers)]
    base = Path(caller) if caller else out_dir / "locks"
    return [{"CUDA_VISIBLE_DEVICES": g, "TRITONDX_LOCK_DIR": str(base / f"gpu{g}")}
            for _ in range(workers) for g in gpus]  # round-robin order: the first tasks spread over the GPUs


# ---------------------------------------------------------------------------------------------------
# One task (a thread of this process, or a Ray task on any node)

def _bench_cmd(task: str, best: str | None, backend_name: str, rounds: int, baselines: bool) -> list[str]:
    return [sys.executable, "-m", "tritondx.batch", "final-bench", task, best or "", backend_name, str(rounds),
            *(["baselines"] if baselines else [])]


def _bench_answer(p: subprocess.CompletedProcess | subprocess.Popen, stdout: str, stderr: str
                  ) -> dict[str, Any] | None:
    """The JSON line a ``final-bench`` child printed, or an error record (redacted)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{") or ln == "null"]
    if p.returncode != 0 or not lines:
        from tritondx.tools.llm.redact import redact_text
        return {"error": redact_text(f"final bench exited with {p.returncode}: {stderr[-500:]}"), "seconds": 0.0}
    return json.loads(lines[-1])


def _final_bench_in_child(task: str, best: str | None, backend_name: str, rounds: int, env: dict[str, str],
                          baselines: bool = False) -> dict[str, Any] | None:
    """``_final_bench`` in a child process with the task's environment (its GPU and lock folder)."""
    from tritondx.tools.exec.sandbox import die_with_parent_fn
    p = subprocess.run(_bench_cmd(task, best, backend_name, rounds, baselines), capture_output=True, text=True,
                       env=env, preexec_fn=die_with_parent_fn())
    return _bench_answer(p, p.stdout, p.stderr)


class TaskTiming(BaseModel):
    """Where a task's wall time went in the batch (results.json ``timing``). The baselines job (torch eager
    and torch.compile beside the initial kernel) runs beside the optimize run (from its triage) or after it,
    beside the final bench (``baselines_start``); the task waits for it only when it is still going after
    both (``baselines_wait_s``)."""

    run_s: float = 0.0             #: the optimize (or resume) process
    final_bench_s: float = 0.0     #: best vs initial after the run (0: no final bench was needed)
    baselines_s: float = 0.0       #: the baselines job's wall seconds (its child process, start to exit)
    baselines_overlapped_s: float = 0.0  #: of those, seconds during which the run or the final bench went on
    baselines_wait_s: float = 0.0  #: seconds the task waited for it after its run and final bench
    #: seconds it went on after the task's end with the task's worker free for the next task (``BASELINES_DETACH_ENV``)
    baselines_after_s: float = 0.0
    baselines_stopped: str = ""    #: why it was stopped before it answered ("" when it answered)
    wall_s: float = 0.0            #: the task's wall seconds, the wait included
    #: ``wall_s`` less the wait: what the task would take if the baselines cost nothing (its CPU and device
    #: share during the run may still have slowed the run; not subtracted, not measurable from one batch)
    wall_without_baselines_s: float = 0.0


#: longest a baselines job waits for its run's triage before it starts anyway
BASELINES_MAX_DELAY_S = 180.0
#: when a task's baselines job starts: ``triaged`` (beside its run, once the probe is done) or ``end`` (after
#: the run, beside its final bench). Unset: ``baselines_start`` picks by the batch's load.
BASELINES_START_ENV = "TRITONDX_BASELINES_START"
#: host cores per concurrent task below which the baselines jobs wait for the runs' ends
CORES_PER_TASK_BESIDE = 8
#: "0": a task started its baselines job at its run's end (``end``) holds its worker until the job answers. Default:
#: the worker goes on to the next task and the job's answer is joined to the task's entry when it comes
#: (``PendingTask``). On the H200 corpus batches of 2026-12-04 (8 workers, ``cost_h200_20261204``) the tasks waited
#: 393-522 s in all for their baselines jobs after their runs, up to 173 s per task, with their workers idle.
BASELINES_DETACH_ENV = "TRITONDX_BASELINES_DETACH"


def baselines_start(concurrent: int) -> str:
    """``triaged`` where the host has cores to spare (at least ``CORES_PER_TASK_BESIDE`` per concurrent
    task), else ``end``: on the H200's 16 cores, 2 tasks with their baselines beside them waited 0 s for
    those (2026-12-02, call 3), while 8 tasks' torch.compile compiles beside their runs made the runs' screens
    2-3x slower (call 5: 66-133 s from rewrite to screened, 35-45 s for four of them without them the day
    before). ``TRITONDX_BASELINES_START`` overrides."""
    chosen = os.environ.get(BASELINES_START_ENV, "")
    if chosen in ("triaged", "end"):
        return chosen
    return "triaged" if max(1, concurrent) * CORES_PER_TASK_BESIDE <= (os.cpu_count() or 1) else "end"


def hw_initial_at(tasks_per_device: int) -> str:
    """When a run starts the initial kernel's half of the hardware check (``timing.HW_INITIAL_AT_ENV``): ``triage``
    (speculative, while the profiler is idle) for one task per device, ``contender`` (with the first would-be
    winner) where several tasks share one device's profiler lock. Why: in the H200 corpus batch of 2026-12-03
    (``bench/results/cost_h200_20261203d``, call 3: 8 tasks per GPU) the profiler lock was held 346 s of 400 s, and
    of 20 hardware-check processes about 16 were initial halves started in triage while only 4 tasks ever had a
    winner: some 12 sessions (median hold 6.5 s) served no check, in the batch's one serial resource. A speculative
    half yields to waiting urgent sessions but, once it holds the lock, finishes. ``TRITONDX_HW_INITIAL_AT``
    overrides."""
    from tritondx.tools.verify.timing import HW_INITIAL_AT_ENV
    chosen = os.environ.get(HW_INITIAL_AT_ENV, "")
    if chosen in ("triage", "contender"):
        return chosen
    return "triage" if tasks_per_device <= 1 else "contender"


# Baselines jobs are started from this one long-lived thread (a child dies with the thread that started it).
_LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tdx-baselines")


def _triaged(log_file: Path) -> bool:
    """True once the run's log says it was triaged (its probe is done)."""
    try:
        return '"event": "triaged"' in log_file.read_text(errors="replace")
    except OSError:
        return False


class BaselinesJob:
    """The task's torch eager / torch.compile timing, in a job of its own beside the optimize run or its final bench.

    A ``final-bench ... baselines`` child process (the task's environment: its GPU and lock folder) whose
    sandboxed bench job runs only the user's original task: the initial kernel, its reference in eager mode
    and under torch.compile, side by side. Its compile (most of its 15-52 s on the H200) overlaps the run's
    phases or the final bench; its timing holds the device exclusively like every bench, so no measurement is disturbed. A child,
    not a thread, so that a failed run or the batch's deadline can stop it (its job dies with it)."""

    def __init__(self, task: str, backend_name: str, rounds: int, env: dict[str, str],
                 after: Path | None = None, max_delay_s: float = BASELINES_MAX_DELAY_S) -> None:
        """``after``: a run's log; the job starts once the run has been triaged there (or after
        ``max_delay_s``): at a batch's start every task's probe, judge server and warm runner start at
        once, and eight torch.compile compiles beside them made the probes 5x slower on the H200
        (2026-12-02: 50 s a task, 10 s the day before)."""
        self.cmd, self.env, self.task = _bench_cmd(task, None, backend_name, rounds, True), env, task
        self.t0 = time.monotonic()
        self.t_end: float | None = None
        # files, not pipes: nobody reads the child's output until the run ends, and a full pipe would stall it
        self.out, self.err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        self.proc: subprocess.Popen | None = None
        self.stopped = ""
        self._gate = threading.Lock()
        self._launched = threading.Event()
        self._waiter = threading.Thread(target=self._start_when_triaged, args=(after, max_delay_s), daemon=True)
        self._waiter.start()

    def _start_when_triaged(self, after: Path | None, max_delay_s: float) -> None:
        deadline = time.monotonic() + max_delay_s
        while after is not None and time.monotonic() < deadline and not self.stopped and not _triaged(after):
            time.sleep(0.5)
        # started from the one long-lived thread: the child dies with the thread that started it
        _LAUNCHER.submit(self._launch).result()
        if self.proc is not None:   # its own end, not when someone asks for its answer
            self.proc.wait()
            self.t_end = self.t_end or time.monotonic()

    def _launch(self) -> None:
        from tritondx.tools.exec.sandbox import die_with_parent_fn
        with self._gate:
            if not self.stopped:
                self.t0 = time.monotonic()
                self.proc = subprocess.Popen(self.cmd, stdout=self.out, stderr=self.err, text=True, env=self.env,
                                             preexec_fn=die_with_parent_fn())
                log.info("baselines_started", task=Path(self.task).stem, pid=self.proc.pid)
            self._launched.set()

    def result(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Wait for the job's answer (at most ``timeout`` seconds, then stop it)."""
        start = time.monotonic()
        if not self._launched.wait(timeout):
            return self.stop("stopped at the batch's deadline")
        try:
            self.proc.wait(timeout=None if timeout is None else max(0.0, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            return self.stop("stopped at the batch's deadline")
        self._waiter.join(5)   # it notes the job's end
        self.t_end = self.t_end or time.monotonic()
        return _bench_answer(self.proc, *self._output())

    def _output(self) -> tuple[str, str]:
        texts = []
        for f in (self.out, self.err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        return texts[0], texts[1]

    def stop(self, why: str) -> dict[str, Any]:
        """Stop the job (its sandboxed bench job ends with it; one not started yet never starts): its
        seconds so far are still reported."""
        with self._gate:
            self.stopped = why
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self._output()
        self.t_end = time.monotonic()
        log.info("baselines_stopped", pid=self.proc.pid if self.proc else None, why=why)
        return {"error": f"baselines job {why}", "seconds": round(self.t_end - self.t0, 3) if self.proc else 0.0}

    @property
    def seconds(self) -> float:
        return (self.t_end or time.monotonic()) - self.t0


def _task_timing(t0: float, run_s: float, final_s: float, wait_s: float, job: BaselinesJob | None,
                 t_end: float | None = None) -> TaskTiming:
    """``TaskTiming`` from what was measured directly: the run, the final bench(es), the wait for the job.
    ``t_end``: when a detached task ended (its worker went on); the job's seconds after it are ``baselines_after_s``."""
    wall = (t_end or time.monotonic()) - t0
    tm = TaskTiming(run_s=round(run_s, 3), final_bench_s=round(final_s, 3), wall_s=round(wall, 3),
                    baselines_wait_s=round(wait_s, 3), wall_without_baselines_s=round(wall - wait_s, 3))
    if job is not None:
        after = max(0.0, (job.t_end or time.monotonic()) - t_end) if t_end is not None else 0.0
        tm.baselines_s = round(job.seconds, 3)
        tm.baselines_after_s = round(min(after, job.seconds), 3)
        tm.baselines_overlapped_s = round(max(0.0, job.seconds - wait_s - after), 3)
        tm.baselines_stopped = job.stopped
    return tm


class PendingTask:
    """A task whose run and final bench are done while its baselines job still runs: its worker is free for the next
    task, and ``finish()`` (called by the batch on a thread of its own) waits for the job and returns the task's
    results.json entry. Its ``wall_s`` ends where the task ended, not where the job did (``baselines_after_s``)."""

    def __init__(self, task: str, finish) -> None:
        self.task = task
        self.finish = finish


class _Benches:
    """The benches a task runs after its optimize run, with the seconds each kind cost it: the final bench
    (best vs initial, no torch baselines) and the wait for its baselines job."""

    def __init__(self, task: str, backend_name: str, rounds: int, env: dict[str, str], pinned: bool) -> None:
        self.task, self.backend_name, self.rounds, self.env, self.pinned = task, backend_name, rounds, env, pinned
        self.final_s = 0.0
        self.wait_s = 0.0

    def final(self, best: str | None) -> dict[str, Any] | None:
        t = time.monotonic()
        try:
            if self.pinned:  # the task's GPU: in a child process with the task's environment
                return _final_bench_in_child(self.task, best, self.backend_name, self.rounds, self.env)
            return _final_bench(self.task, best, self.backend_name, self.rounds)
        finally:
            self.final_s += time.monotonic() - t

    def wait(self, how) -> dict[str, Any] | None:
        t = time.monotonic()
        try:
            return how()
        finally:
            self.wait_s += time.monotonic() - t


def _optimize(task: str, run_path: Path, backend_name: str, extra_args: list[str] | None, env: dict[str, str],
              not_after: float | None) -> subprocess.CompletedProcess | None:
    """The task's ``tritondx optimize`` process (or resume/keep what a killed batch left in ``run_path``);
    None when it was stopped at the batch's deadline."""
    from tritondx.tools.exec.sandbox import die_with_parent_fn  # imported here, never inside the forked child
    cmd = [sys.executable, "-m", "tritondx.cli", "optimize", task, "--backend", backend_name, "--out",
           str(run_path), *(extra_args or [])]
    earlier = _earlier_run(run_path, env.get("TRITONDX_CHECKPOINT_URL") or None)
    if earlier == "finished":  # the batch died after the run, before results.json: keep the run
        return subprocess.CompletedProcess(cmd, 0, "", "")
    if earlier == "interrupted":  # the batch died during the run: continue it from its checkpoint
        cmd = [sys.executable, "-m", "tritondx.cli", "resume", str(run_path)]
    elif run_path.exists():  # a run that died before its first checkpoint: nothing to keep
        shutil.rmtree(run_path)
    # The child dies with this process (kill -9 included), so a resumed batch never races an
    # orphaned run on the same folder. At the batch's deadline a run still going is stopped: its
    # checkpoints stay, and the next batch on this folder (or `tritondx resume`) continues it.
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=die_with_parent_fn(),
                              timeout=max(1.0, not_after - time.time()) if not_after else None)
    except subprocess.TimeoutExpired:
        return None


def _best_path(run_path: Path, task: str) -> str | None:
    """The run's best kernel file, or None when the best is the initial kernel (or there is no report). The
    report names the run folder's copy of the task (``task_initial.py``) when no candidate won: that is the
    initial kernel too (a final bench of it beside itself cost 40-46 s per such task in the H200 corpus batch of
    2026-12-03 and reported a 0.95x "speedup" for an unchanged kernel)."""
    rep = run_path / "report.json"
    if not rep.exists():
        return None
    rec = json.loads(rep.read_text()).get("best") or {}
    best = rec.get("path")
    if not best or rec.get("id") == "initial" or not Path(best).exists() or Path(best).resolve() == Path(task).resolve():
        return None
    if Path(task).exists() and Path(best).read_bytes() == Path(task).read_bytes():
        return None
    return best


def run_one(task: str, run_dir: str, backend_name: str, extra_args: list[str] | None, final_rounds: int,
            env_extra: dict[str, str], not_after: float | None = None, detach: bool = False
            ) -> "dict[str, Any] | PendingTask":
    """Optimize one task in its own process, with its baselines job (torch eager, torch.compile) beside it on
    a backend that times; after the run a final bench times the best kernel against the initial one (no
    torch.compile there); returns its results.json entry. ``env_extra`` goes over this process's environment
    for all of them (GPU pinning, lock folder, checkpoint URL). ``detach``: a baselines job started at the run's
    end is not waited for here: a ``PendingTask`` comes back instead, whose ``finish()`` waits for it."""
    run_path = Path(run_dir)
    name = Path(task).stem
    if not_after and time.time() > not_after:
        return {"task": name, "path": task, "status": "skipped", "exit": None, "wall_s": 0.0}
    t0 = time.monotonic()
    env = {**os.environ, **env_extra}
    from tritondx.tools.backends.base import get_backend
    timed = get_backend(backend_name).can_time
    beside = env.get(BASELINES_START_ENV, "triaged") != "end"
    job = BaselinesJob(task, backend_name, final_rounds, env, after=run_path / "log.jsonl") if timed and beside else None
    p = _optimize(task, run_path, backend_name, extra_args, env, not_after)
    t_run = time.monotonic()
    if timed and not beside and p is not None and p.returncode == 0:   # after the run, beside its final bench
        job = BaselinesJob(task, backend_name, final_rounds, env)
    if p is None:
        entry = {"task": name, "path": task, "status": "not_finished", "exit": None, "wall_s": t_run - t0,
                 "stderr_tail": f"stopped at the batch's deadline; `tritondx resume {run_path}` continues it"}
        if job:  # its seconds so far are reported, never dropped
            t = time.monotonic()
            entry["phase_seconds"] = {"baselines": job.stop("stopped at the batch's deadline")["seconds"]}
            entry["timing"] = _task_timing(t0, t_run - t0, 0.0, time.monotonic() - t, job).model_dump()
        return entry
    bench = _Benches(task, backend_name, final_rounds, env, pinned="CUDA_VISIBLE_DEVICES" in env_extra)
    final = base = None
    if p.returncode != 0 and job:
        base = bench.wait(lambda: job.stop("stopped: the run failed"))
    elif job:
        best = _best_path(run_path, task)
        if best:  # best vs initial side by side; no best: the baselines job's initial timing is the answer
            final = bench.final(best)
        t_end = time.monotonic()

        def conclude(final=final) -> dict[str, Any]:
            base = bench.wait(lambda: job.result(timeout=max(1.0, not_after - time.time()) if not_after else None))
            if not best and not (base and "shapes" in base):  # the initial kernel untimed: time it alone now
                final = bench.final(None)
            detached = t_end if detach and not beside else None
            timing = _task_timing(t0, t_run - t0, bench.final_s, 0.0 if detached else bench.wait_s, job, detached)
            return _entry(task, run_path, p, final, base, timing, env_extra)

        if detach and not beside:
            return PendingTask(name, conclude)
        return conclude()
    timing = _task_timing(t0, t_run - t0, bench.final_s, bench.wait_s, job) if job else None
    return _entry(task, run_path, p, final, base, timing, env_extra, t0)


def _entry(task: str, run_path: Path, p: subprocess.CompletedProcess, final: dict[str, Any] | None,
           base: dict[str, Any] | None, timing: TaskTiming | None, env_extra: dict[str, str],
           t0: float | None = None) -> dict[str, Any]:
    entry = summarize_task(task, run_path, p.returncode, timing.wall_s if timing else time.monotonic() - t0,
                           final, p.stderr, base, timing)
    if env_extra.get("CUDA_VISIBLE_DEVICES"):
        entry["gpu"] = env_extra["CUDA_VISIBLE_DEVICES"]
    return entry


def _ray_one(task: str, run_dir: str, backend_name: str, extra_args: list[str] | None, final_rounds: int,
             env_extra: dict[str, str], not_after: float | None, lock_key: str, lock_base: str = ""
             ) -> dict[str, Any]:
    """Body of one Ray task: Ray has set ``CUDA_VISIBLE_DEVICES`` to the GPU it granted (if any); tasks
    sharing a GPU (``--workers`` > 1) share a node-local lock folder for it: ``lock_base/gpu<id>`` on a
    local instance (the batch's own lock folder, or its caller's, so other work of the caller on the
    same GPUs takes turns with the Ray tasks), else one under the node's temporary folder."""
    import socket
    import tempfile
    env_extra = dict(env_extra)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if backend_name == "cuda" and gpu:
        env_extra["CUDA_VISIBLE_DEVICES"] = gpu
        base = Path(lock_base) if lock_base else Path(tempfile.gettempdir()) / "tritondx-locks" / lock_key
        env_extra["TRITONDX_LOCK_DIR"] = str(base / f"gpu{gpu.replace(',', '_')}")
    entry = run_one(task, run_dir, backend_name, extra_args, final_rounds, env_extra, not_after)
    entry["node"] = socket.gethostname()
    return entry


def _ray_init(address: str, backend_name: str, workers: int):
    try:
        import ray
    except ImportError:
        from tritondx.errors import TritonDXError
        raise TritonDXError("--ray-address needs Ray: pip install 'tritondx[scale]'") from None
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address == "local":  # a fresh single-node instance owned by this process
        if backend_name != "cuda":
            kw["num_cpus"] = max(1, workers)  # --workers bounds the tasks at once, as without Ray
        ray.init(address="local", **kw)
    else:
        kw.pop("include_dashboard")
        ray.init(address=address, **kw)
    return ray


def _run_ray(todo: list[str], address: str, backend_name: str, workers: int, out_dir: Path,
             extra_args: list[str] | None, final_rounds: int, env_extra: dict[str, str], not_after: float | None,
             on_result) -> None:
    if not todo:
        return
    ray = _ray_init(address, backend_name, workers)
    try:
        import hashlib
        lock_key = hashlib.sha256(str(out_dir.resolve()).encode()).hexdigest()[:12]
        lock_base = os.environ.get("TRITONDX_LOCK_DIR", "") if address == "local" else ""
        gpus = (1.0 / max(1, workers)) if backend_name == "cuda" else 0
        remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(_ray_one)
        refs = {remote.remote(t, str((out_dir / "runs" / Path(t).stem).resolve()), backend_name, extra_args,
                              final_rounds, env_extra, not_after, lock_key, lock_base): t for t in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            task = refs[ready[0]]
            try:
                entry = ray.get(ready[0])
            except Exception as exc:  # the Ray task itself failed (worker died, node lost): record, go on
                from tritondx.tools.llm.redact import redact_text
                entry = {"task": Path(task).stem, "path": task, "exit": None, "wall_s": 0.0, "status": "failed",
                         "stderr_tail": redact_text(f"ray: {type(exc).__name__}: {exc}")[-800:]}
            on_result(entry)
    finally:
        ray.shutdown()


def _entry_word(entry: dict[str, Any]) -> str:
    """A finished task in one word or two, as summary.md's speedup cell says it."""
    if entry.get("speedup"):
        return f"{entry['speedup']:.2f}x"
    return _unmeasured(entry)


class BatchProgress:
    """A batch's progress: on a terminal a bar (rich); elsewhere (a pipe, a log file, CI) lines on stderr: one
    per finished task and, while tasks run and nothing was said for ``every`` seconds (``TRITONDX_HEARTBEAT_S``,
    15), one naming the running tasks and how long each has run."""

    def __init__(self, total: int, done: int, out_dir: Path, terminal: bool | None = None,
                 every: float | None = None) -> None:
        from tritondx.logs import heartbeat_every
        self.total, self.count = total, done
        self.terminal = sys.stdout.isatty() if terminal is None else terminal
        self.every = every or heartbeat_every()
        self.running: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last = time.monotonic()
        self._bar = self._thread = None
        if self.terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
            self._bar.start()
            self._bar_id = self._bar.add_task("tritondx batch", total=total, completed=done)
        else:
            self.say(f"{total} task(s)" + (f", {done} finished earlier" if done else "") + f"; results in {out_dir}")
            self._thread = threading.Thread(target=self._loop, name="tdx-batch-progress", daemon=True)
            self._thread.start()

    def say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} batch: {text}", file=sys.stderr, flush=True)
        self._last = time.monotonic()

    def started(self, task: str) -> None:
        with self._lock:
            self.running[task] = time.monotonic()

    def finished(self, entry: dict[str, Any]) -> None:
        with self._lock:
            t0 = self.running.pop(entry["task"], None)
            if entry["status"] != "skipped":
                self.count += 1
            count = self.count
        if self._bar is not None:
            self._bar.update(self._bar_id, advance=1, description=f"{entry['task']}: {_entry_word(entry)}")
        elif entry["status"] == "skipped":
            self.say(f"{entry['task']}: skipped (the deadline had passed)")
        else:
            took = entry.get("wall_s") or (time.monotonic() - t0 if t0 else None)
            self.say(f"[{count}/{self.total}] {entry['task']}: {_entry_word(entry)}"
                     + (f" ({took:.0f} s)" if took else ""))

    def beat(self) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        with self._lock:
            running = sorted(self.running.items(), key=lambda kv: kv[1])
            count = self.count
        if running:
            names = ", ".join(f"{t} {now - t0:.0f} s" for t, t0 in running)
            self.say(f"{len(running)} running ({names}); {count}/{self.total} finished")
        else:
            self.say(f"{count}/{self.total} finished; waiting for the running tasks")

    def _loop(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            try:
                self.beat()
            except Exception:  # progress only
                pass

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._bar is not None:
            self._bar.stop()


def run_batch(*args, **kwargs) -> dict[str, Any]:
    """Run every task of a folder (see ``_run_batch``). The device-lock folder the batch sets for its
    own final benches is put back afterwards, so a later batch in the same process starts clean."""
    before = os.environ.get("TRITONDX_LOCK_DIR")
    try:
        return _run_batch(*args, **kwargs)
    finally:
        if before is None:
            os.environ.pop("TRITONDX_LOCK_DIR", None)
        else:
            os.environ["TRITONDX_LOCK_DIR"] = before


def _run_batch(folder: str, out: str, backend: str = "auto", workers: int = 1, extra_args: list[str] | None = None,
               final_rounds: int = 3, progress: bool = True, only: list[str] | None = None,
               deadline_s: float | None = None, shuffle: bool = False, ray_address: str | None = None,
               checkpoint_url: str | None = None) -> dict[str, Any]:
    from tritondx.tools.backends.base import get_backend
    tasks = sorted(str(p.resolve()) for p in Path(folder).glob("*.py") if not p.name.startswith("_"))
    if only:
        tasks = [t for t in tasks if Path(t).stem in only]
    if shuffle:  # a fixed pseudo-random order: a batch cut short by a deadline is still a fair sample
        import hashlib
        tasks.sort(key=lambda t: hashlib.sha256(Path(t).stem.encode()).hexdigest())
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    res_file = out_dir / "results.json"
    previous = json.loads(res_file.read_text())["results"] if res_file.exists() else []
    done = {r["task"]: r for r in previous if r.get("status") == "done"}
    results = list(done.values())
    todo = [t for t in tasks if Path(t).stem not in done]
    be = get_backend(backend)
    env_extra: dict[str, str] = {}
    if checkpoint_url:
        from tritondx.checkpoints import URL_ENV, check_url
        env_extra[URL_ENV] = check_url(checkpoint_url) or ""
    gpus = [] if ray_address else visible_gpus(be.name)
    slots = plan_slots(gpus, workers, out_dir)
    env_extra[BASELINES_START_ENV] = baselines_start(len(slots))
    detach = env_extra[BASELINES_START_ENV] == "end" and os.environ.get(BASELINES_DETACH_ENV, "1") != "0"
    from tritondx.tools.verify.timing import HW_INITIAL_AT_ENV
    env_extra[HW_INITIAL_AT_ENV] = hw_initial_at(max(1, workers))   # tasks per device (Ray: num_gpus=1/workers)
    meta = {"suite": folder, "backend": be.name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": sys.version.split()[0], "workers": max(1, workers),
            "baselines_start": env_extra[BASELINES_START_ENV], "hw_initial_at": env_extra[HW_INITIAL_AT_ENV],
            "baselines_detached": detach and not ray_address}
    if len(gpus) > 1:
        meta["gpus"] = gpus
    if ray_address:
        meta["ray"] = "local" if ray_address == "local" else "cluster"
    try:
        import torch
        import triton
        meta.update({"torch": torch.__version__, "triton": triton.__version__,
                     "device": be.describe() + (f" x{len(gpus)}" if len(gpus) > 1 else "")})
    except Exception:  # metadata only
        pass
    lock = threading.Lock()
    # this process's final benches take the lock too; a caller's folder is kept (shared with its other work)
    os.environ["TRITONDX_LOCK_DIR"] = os.environ.get("TRITONDX_LOCK_DIR") or str(out_dir / ".locks")
    start = time.time()
    not_after = start + deadline_s if deadline_s else None

    bar = BatchProgress(len(tasks), len(done), out_dir) if progress else None

    def on_result(entry: dict[str, Any]) -> None:
        with lock:
            if entry["status"] != "skipped":
                results.append(entry)
                write_summary(out_dir, results, meta)
        if bar:
            bar.finished(entry)

    from tritondx.tools.exec.gpulock import HeldSampler
    from tritondx.tools.run.host import HostCpu
    sampler = HeldSampler([s["TRITONDX_LOCK_DIR"] for s in slots] if not ray_address else [])
    sampler.__enter__()
    host = HostCpu().start() if not ray_address else None   # a Ray cluster's hosts are not this one

    def held_meta() -> None:
        if sampler.folders:
            meta["device_held"] = sampler.summary()
        if host is not None:
            meta["host_cpu"] = host.summary()

    def on_result_held(entry: dict[str, Any]) -> None:
        held_meta()
        on_result(entry)

    try:
        if ray_address:
            _run_ray(todo, ray_address, be.name, workers, out_dir, extra_args, final_rounds, env_extra, not_after,
                     on_result_held)
        else:
            free: queue.Queue[dict[str, str]] = queue.Queue()
            for s in slots:
                free.put(s)

            def one(task: str) -> "dict[str, Any] | PendingTask":
                slot = free.get()  # never waits long: the pool has exactly one thread per slot
                if bar:
                    bar.started(Path(task).stem)
                try:
                    return run_one(task, str(out_dir / "runs" / Path(task).stem), be.name, extra_args,
                                   final_rounds, {**slot, **env_extra}, not_after, detach=detach)
                finally:
                    free.put(slot)

            # a detached task's baselines job is waited for on a thread of its own (``PendingTask``)
            pool = ThreadPoolExecutor(max_workers=len(slots))
            waiters = ThreadPoolExecutor(max_workers=max(1, len(todo)), thread_name_prefix="tdx-pending")
            stopped = False
            try:
                running = {pool.submit(one, t) for t in todo}
                while running:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        got = fut.result()
                        if isinstance(got, PendingTask):
                            running.add(waiters.submit(got.finish))
                        else:
                            on_result_held(got)
            except BaseException:  # Ctrl-C, SIGTERM: not held up by the runs still going (they die with us;
                stopped = True     # their checkpoints stay, and the next batch on this folder resumes them)
                raise
            finally:
                for ex in (pool, waiters):
                    ex.shutdown(wait=not stopped, cancel_futures=stopped)
    finally:
        sampler.__exit__(None, None, None)
        held_meta()
        if bar:
            bar.close()
    return write_summary(out_dir, results, meta)


def _final_bench_main(argv: list[str]) -> int:
    task, best, backend_name, rounds, *flag = argv
    print(json.dumps(_final_bench(task, best or None, backend_name, int(rounds), baselines=flag == ["baselines"]),
                     default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (6, 7) and sys.argv[1] == "final-bench":
        sys.exit(_final_bench_main(sys.argv[2:]))
    sys.exit("usage: python -m tritondx.batch final-bench TASK BEST BACKEND ROUNDS [baselines]")
