"""A batch's results: each task's ``results.json`` entry (its run's report, its final bench and its baselines job,
each ratio labelled with how it was measured), the aggregate over the tasks, and ``summary.md``, ``speedups.png``
and ``report.html`` written from them."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from tritondx.batch_bench import FINAL_AT_DEADLINE, TaskTiming
from tritondx.tools.records.evidence import TIERS
from tritondx.tools.run import phases


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
RUN_BENCH = ("side by side in the run's last bench job (best vs initial, the round that chose it); the final bench "
             "was stopped at the batch's deadline")
RUN_DECISIVE = ("side by side in the run's last bench job (best vs initial, the round that chose it); no final "
                "bench: the gain is beyond what picking the best of a few timed candidates can produce "
                "(batch_task.RECHECK_BELOW)")
UNCHANGED_UNTIMED = ("1 by definition: the run kept the initial kernel (no candidate beat it); not timed, its baselines "
                     "job was stopped at the batch's deadline")
RUN_DERIVED = ("derived through the initial kernel: (torch / initial, baselines job) x (initial / best, the run's "
               "last bench job)")


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
                      "run_speedup": r.get("speedup"),
                      "best_family": (r.get("best") or {}).get("family"),
                      "run_best": (r.get("best") or {}).get("id"),
                      "rewrites_applied": _lineage(r), "speed": r["speed"],
                      "cost": dict(r.get("cost") or {})})
        if r.get("verifier", "judge") != "judge":   # a test setting: nothing of this run was checked
            entry["verifier"] = r["verifier"]
        cands = [c for c in r["candidates"] if c.get("measurement")]
        # per-tier ablation: best measured speedup using evidence up to each tier
        entry["best_by_tier"] = {t: max([1.0] + [c["measurement"]["speedup"] for c in cands
                                                 if TIERS.index(c["tier"]) <= TIERS.index(t) and c["verified"]])
                                 for t in TIERS}
        entry["candidates"] = len(r["candidates"])
        entry["rejected"] = sum(1 for c in r["candidates"] if c["verified"] is False)
    extra_phases = {}
    if final and final.get("seconds"):  # the final bench is the batch's, after the run
        extra_phases[phases.PHASE + "final_bench"] = round(final["seconds"], 3)
    if base and base.get("seconds"):  # the baselines job ran beside the run (timing says how much overlapped)
        extra_phases[phases.PHASE + "baselines"] = round(base["seconds"], 3)
    if extra_phases:  # the task's cost ledger (tools/run/phases.py): its run's, and the batch's jobs for it
        entry["cost"] = {**(entry.get("cost") or {}), **extra_phases}
    entry.update(_speed_fields(final, base))
    if final and final.get("skipped"):
        entry["final_bench_skipped"] = final["skipped"]
    if final and "shapes" not in final:
        if not final.get("skipped"):
            entry["final_bench_error"] = final.get("error")
        stopped = FINAL_AT_DEADLINE in (final.get("error") or "")
        if (stopped or final.get("skipped")) and entry.get("run_speedup") and \
                entry.get("speed") == "measured":   # the run's own side-by-side figure, said so
            entry["speedup"] = entry["run_speedup"]
            how = entry.setdefault("measured_how", {})
            how["speedup"] = RUN_BENCH if stopped else RUN_DECISIVE
            ok_base = base if base and "shapes" in base else None
            if ok_base is not None:   # absolute times and roofline from the baselines job's initial, through it
                t0 = _per_variant_geo(ok_base, "initial")
                rf = _per_variant_geo(ok_base, "initial", "roofline_fraction")
                entry.update({"initial_ms": t0, "optimized_ms": t0 / entry["speedup"] if t0 else None,
                              "roofline_before": rf, "roofline_after": rf * entry["speedup"] if rf else None})
                for vid, key in (("torch_eager", "vs_torch_eager"), ("torch_compile", "vs_torch_compile")):
                    direct = _direct_vs_torch(ok_base, vid)
                    entry[key] = direct * entry["speedup"] if direct else None
                    entry[f"{vid}_ms"] = _per_variant_geo(ok_base, vid)
                entry["baselines_bench"] = ok_base
                entry["baselines_initial_ms"] = t0
                how["torch"] = SIDE_BY_SIDE_BASELINES
                how["vs_torch"] = RUN_DERIVED
    if base and "shapes" not in base:
        entry["baselines_error"] = base.get("error")
    if entry.get("speedup") is None and rc == 0 and (entry.get("run_best") or "") == "initial":
        # the run's output is the task's own kernel: its speedup is 1 whether or not anything was timed
        entry["speedup"] = 1.0
        entry.setdefault("measured_how", {})["speedup"] = UNCHANGED_UNTIMED
    if timing is not None:
        entry["timing"] = timing.model_dump()
        entry["wall_without_baselines_s"] = timing.wall_without_baselines_s
    return entry


def _pct(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else "-"


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


def _with_torch(done: list[dict[str, Any]], vid: str) -> list[dict[str, Any]]:
    """The tasks with a ratio to the torch baseline ``vid``: measured (``vs_torch_*``), or both absolute times (older
    batches, everything in one job)."""
    def measured(r):
        return bool((r.get("measured_how") or {}).get("vs_torch"))
    return [r for r in done if (r.get(f"vs_{vid}") if measured(r) else r.get(f"{vid}_ms") and r.get("optimized_ms"))]


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
                           "unchanged_untimed": sum(1 for r in done if (r.get("measured_how") or {}).get("speedup")
                                                    == UNCHANGED_UNTIMED),
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
        compiled, eager = _with_torch(done, "torch_compile"), _with_torch(done, "torch_eager")
        if compiled:
            agg["geomean_vs_torch_compile"] = geomean([_vs_torch(r, "torch_compile") for r in compiled])
        if eager:
            agg["geomean_vs_torch_eager"] = geomean([_vs_torch(r, "torch_eager") for r in eager])
        with_torch = {id(r): r for r in compiled + eager}
        if with_torch:
            agg["vs_torch_derived"] = sum(1 for r in with_torch.values()
                                          if (r.get("measured_how") or {}).get("vs_torch") == DERIVED)
            agg["vs_torch_run_derived"] = sum(1 for r in with_torch.values()
                                              if (r.get("measured_how") or {}).get("vs_torch") == RUN_DERIVED)
        agg.update(_baselines_aggregate(done, results))
        agg["ablation_geomean_by_tier"] = {t: geomean([r["best_by_tier"][t] for r in done if "best_by_tier" in r])
                                           for t in TIERS}
        cpu_s = [sum(phases.cpu(r.get("cost")).values()) for r in done if phases.cpu(r.get("cost"))]
        if cpu_s:
            agg["median_cpu_s"] = statistics.median(cpu_s)
    # the tasks' cost ledgers summed key by key (tools/run/phases.py): device seconds, analysis, phases, CPU, wall
    cost = phases.summed(r.get("cost") for r in results)
    if cost:
        agg["cost"] = cost
    return agg


def device_held_line(h: dict[str, Any]) -> str:
    """One line: how much of the batch's wall time the device was held (tools/exec/held_sampler.HeldSampler)."""
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
    n = agg.get("vs_torch_run_derived")
    if n:
        lines.append(f"  - vs torch: {n} task(s) derived through the initial kernel with the run's own bench "
                     "(torch / initial in the baselines job x initial / optimized in the run's bench that chose it: "
                     "no final bench, see measured_how)")
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
        lines += [f"- tasks: {agg['tasks']} (measured {agg['measured']}"
                  + (f", of which {agg['unchanged_untimed']} kept the initial kernel untimed (1x by definition)"
                     if agg.get("unchanged_untimed") else "") + f", failed {agg['failed']}"
                  + (f", not finished by the deadline {agg['not_finished']}" if agg.get("not_finished") else "") + ")",
                  f"- geomean speedup: **{agg['geomean_speedup']:.2f}x**, median {agg['median_speedup']:.2f}x",
                  f"- over 2x: {agg['over_2x']}/{agg['measured']}; over 5x: {agg['over_5x']}/{agg['measured']}",
                  f"- roofline fraction (geomean): before {_pct(agg['roofline_before_geomean'])}, "
                  f"after {_pct(agg['roofline_after_geomean'])}"]
        if agg.get("geomean_vs_torch_compile"):
            lines.append(f"- optimized vs torch.compile: {agg['geomean_vs_torch_compile']:.2f}x (geomean of "
                         "compile time / optimized time; >1 means faster than torch.compile)")
        if agg.get("geomean_vs_torch_eager"):
            lines.append(f"- optimized vs torch eager: {agg['geomean_vs_torch_eager']:.2f}x")
        lines += _how_measured_lines(agg)
        jobs, held = phases.device(agg.get("cost"))
        lines.append(f"- median wall per task: {agg['median_wall_s']:.0f} s; device-job seconds in all: "
                     f"{jobs:.0f}" + (f", of which holding the device: {held:.0f}" if held else ""))
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
    if phases.part(agg.get("cost"), phases.PHASE):
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
            lines[-1] += (f"{_pct(rb)} -> {_pct(ra)} | {us(r.get('torch_eager_ms'))} | {us(r.get('torch_compile_ms'))} | "
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
    ph = phases.part(agg.get("cost"), phases.PHASE)
    overlapped = ph.pop("baselines", None) if agg.get("baselines") else None
    lines = phases.table_md(ph)
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
