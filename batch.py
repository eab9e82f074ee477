"""Headless batch: optimize every task in a folder, resumably, and report like the paper.

Each task runs as its own ``tritondx optimize`` process (its own run folder and checkpoint
database), several at once; on a GPU, timing holds the device exclusively (tools/gpulock.py) so
concurrent tasks never disturb a measurement. ``results.json`` is rewritten atomically after every
task: a batch killed at any point (even kill -9) resumes without redoing a finished task.
After each task, one more side-by-side measurement times the initial kernel, the best kernel, torch
eager and torch.compile together; those are the numbers the summary reports.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tritondx.tools.evidence import TIERS


def _atomic_write(path: Path, data: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _final_bench(task: str, best_path: str | None, backend_name: str, rounds: int) -> dict[str, Any] | None:
    from tritondx.tools.backends.base import get_backend
    from tritondx.tools.verifier import bench_variants
    backend = get_backend(backend_name)
    if not backend.can_time:
        return None
    variants = [{"id": "initial", "path": task}]
    if best_path and Path(best_path).exists():
        variants.append({"id": "best", "path": best_path})
    result, error, seconds = bench_variants(task, variants, backend, rounds=rounds, baselines=True)
    if result is None:
        return {"error": error, "seconds": seconds}
    out: dict[str, Any] = {"seconds": seconds, "shapes": []}
    for e in result["shapes"]:
        out["shapes"].append({"shape": e["shape"], "dtype": e["dtype"], "floor_ms": e["floor_ms"],
                              **{vid: {"median_ms": v["median_ms"], "spread": v["spread"],
                                       "roofline_fraction": v["roofline_fraction"]}
                                 for vid, v in e["variants"].items()}, "errors": e["errors"]})
    return out


def _per_variant_geo(final: dict[str, Any], vid: str, key: str = "median_ms") -> float | None:
    vals = [s[vid][key] for s in final.get("shapes", []) if vid in s and s[vid].get(key)]
    return geomean(vals)


def summarize_task(task: str, run_dir: Path, rc: int, wall: float, final: dict[str, Any] | None,
                   stderr: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"task": Path(task).stem, "path": task, "exit": rc, "wall_s": wall,
                             "status": "done" if rc == 0 else "failed", "stderr_tail": stderr[-800:]}
    rep = run_dir / "report.json"
    if rep.exists():
        r = json.loads(rep.read_text())
        entry.update({"kernel_class": r["kernel_class"], "tiers_used": r["tiers_used"], "rounds": r["rounds"],
                      "gpu_seconds": r["gpu_seconds"], "run_speedup": r.get("speedup"),
                      "best_family": (r.get("best") or {}).get("family"),
                      "rewrites_applied": _lineage(r), "speed": r["speed"]})
        cands = [c for c in r["candidates"] if c.get("measurement")]
        # per-tier ablation: best measured speedup using evidence up to each tier
        entry["best_by_tier"] = {t: max([1.0] + [c["measurement"]["speedup"] for c in cands
                                                 if TIERS.index(c["tier"]) <= TIERS.index(t) and c["verified"]])
                                 for t in TIERS}
        entry["candidates"] = len(r["candidates"])
        entry["rejected"] = sum(1 for c in r["candidates"] if c["verified"] is False)
    if final and "shapes" in final:
        t0 = _per_variant_geo(final, "initial")
        tb = _per_variant_geo(final, "best") or t0
        entry.update({
            "initial_ms": t0, "optimized_ms": tb, "speedup": (t0 / tb) if t0 and tb else None,
            "roofline_before": _per_variant_geo(final, "initial", "roofline_fraction"),
            "roofline_after": _per_variant_geo(final, "best", "roofline_fraction")
            or _per_variant_geo(final, "initial", "roofline_fraction"),
            "torch_eager_ms": _per_variant_geo(final, "torch_eager"),
            "torch_compile_ms": _per_variant_geo(final, "torch_compile"),
            "final_bench": final,
        })
    elif final:
        entry["final_bench_error"] = final.get("error")
    return entry


def _lineage(report: dict[str, Any]) -> list[str]:
    cands = {c["id"]: c for c in report["candidates"]}
    out, cur = [], (report.get("best") or {}).get("id")
    while cur in cands:
        out.append(cands[cur]["family"])
        cur = cands[cur]["parent"]
    return list(reversed(out))


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in results if r.get("speedup")]
    sp = [r["speedup"] for r in done]
    agg: dict[str, Any] = {"tasks": len(results), "measured": len(done),
                           "failed": sum(1 for r in results if r["status"] != "done")}
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
            agg["geomean_vs_torch_compile"] = geomean([r["torch_compile_ms"] / r["optimized_ms"] for r in both])
        eager = [r for r in done if r.get("torch_eager_ms") and r.get("optimized_ms")]
        if eager:
            agg["geomean_vs_torch_eager"] = geomean([r["torch_eager_ms"] / r["optimized_ms"] for r in eager])
        agg["ablation_geomean_by_tier"] = {t: geomean([r["best_by_tier"][t] for r in done if "best_by_tier" in r])
                                           for t in TIERS}
        agg["gpu_seconds"] = sum(r.get("gpu_seconds") or 0 for r in results)
    return agg


def write_summary(out: Path, results: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    agg = aggregate(results)
    _atomic_write(out / "results.json", json.dumps({"meta": meta, "aggregate": agg, "results": results},
                                                   indent=1, default=str))
    lines = [f"# tritondx batch: {meta.get('suite')}", "",
             f"device: {meta.get('device')}; torch {meta.get('torch')}; triton {meta.get('triton')}; "
             f"date {meta.get('date')}", ""]
    if agg.get("geomean_speedup"):
        lines += [f"- tasks: {agg['tasks']} (measured {agg['measured']}, failed {agg['failed']})",
                  f"- geomean speedup: **{agg['geomean_speedup']:.2f}x**, median {agg['median_speedup']:.2f}x",
                  f"- over 2x: {agg['over_2x']}/{agg['measured']}; over 5x: {agg['over_5x']}/{agg['measured']}",
                  f"- roofline fraction (geomean): before {agg['roofline_before_geomean']:.0%}, "
                  f"after {agg['roofline_after_geomean']:.0%}"]
        if agg.get("geomean_vs_torch_compile"):
            lines.append(f"- optimized vs torch.compile: {agg['geomean_vs_torch_compile']:.2f}x (geomean of "
                         "compile time / optimized time; >1 means faster than torch.compile)")
        if agg.get("geomean_vs_torch_eager"):
            lines.append(f"- optimized vs torch eager: {agg['geomean_vs_torch_eager']:.2f}x")
        lines.append(f"- median wall per task: {agg['median_wall_s']:.0f} s; device-job seconds in all: "
                     f"{agg['gpu_seconds']:.0f}")
        lines.append("- ablation (geomean when stopping after each tier): " + ", ".join(
            f"{t} {v:.2f}x" for t, v in agg["ablation_geomean_by_tier"].items() if v))
    lines += ["", "| task | class | initial (us) | optimized (us) | speedup | roofline before -> after | "
                  "eager (us) | compile (us) | tiers | rewrites | wall (s) |", "|" + "---|" * 11]
    for r in sorted(results, key=lambda r: r["task"]):
        def us(x):
            return f"{x * 1e3:.1f}" if x else "-"
        rb, ra = r.get("roofline_before"), r.get("roofline_after")
        lines.append(f"| {r['task']} | {r.get('kernel_class', '-')} | {us(r.get('initial_ms'))} | "
                     f"{us(r.get('optimized_ms'))} | {r['speedup']:.2f}x | " if r.get("speedup") else
                     f"| {r['task']} | {r.get('kernel_class', '-')} | - | - | {r['status']} | ")
        if r.get("speedup"):
            lines[-1] += (f"{rb:.0%} -> {ra:.0%} | {us(r.get('torch_eager_ms'))} | {us(r.get('torch_compile_ms'))} | "
                          f"{','.join(r.get('tiers_used', []))} | {'+'.join(r.get('rewrites_applied', [])) or '-'} | "
                          f"{r['wall_s']:.0f} |")
        else:
            lines[-1] += f"- | - | - | {','.join(r.get('tiers_used', []))} | - | {r['wall_s']:.0f} |"
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(out, results)
    from tritondx.tools.report.html import write_batch_html
    write_batch_html(out, results, agg, meta)  # report.html: one self-contained page with the plots
    return agg


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


def _earlier_run(run_dir: Path) -> str | None:
    """What a previous, killed batch left in ``run_dir``: "finished" (report written), "interrupted"
    (checkpoints to resume from) or None (nothing usable)."""
    if (run_dir / "report.json").exists():
        return "finished"
    db = run_dir / "checkpoints.sqlite"
    if not (run_dir / "run.json").exists() or not db.exists():
        return None
    import sqlite3
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            n = con.execute("select count(*) from checkpoints").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return "interrupted" if n else None


def run_batch(folder: str, out: str, backend: str = "auto", workers: int = 1, extra_args: list[str] | None = None,
              final_rounds: int = 3, progress: bool = True, only: list[str] | None = None,
              deadline_s: float | None = None, shuffle: bool = False) -> dict[str, Any]:
    from tritondx.tools.backends.base import get_backend
    from tritondx.tools.sandbox import die_with_parent_fn  # imported here, never inside the forked child
    tasks = sorted(str(p) for p in Path(folder).glob("*.py") if not p.name.startswith("_"))
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
    meta = {"suite": folder, "backend": be.name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": sys.version.split()[0]}
    try:
        import torch
        import triton
        meta.update({"torch": torch.__version__, "triton": triton.__version__,
                     "device": torch.cuda.get_device_name() if be.name == "cuda" else be.describe()})
    except Exception:  # metadata only
        pass
    lock = threading.Lock()
    os.environ["TRITONDX_LOCK_DIR"] = os.environ.get("TRITONDX_LOCK_DIR") or str(out_dir / ".locks")  # this process's final benches take it too
    env = dict(os.environ)
    start = time.time()

    def one(task: str) -> dict[str, Any]:
        run_dir = out_dir / "runs" / Path(task).stem
        if deadline_s and time.time() - start > deadline_s:
            return {"task": Path(task).stem, "path": task, "status": "skipped", "exit": None, "wall_s": 0.0}
        t0 = time.time()
        cmd = [sys.executable, "-m", "tritondx.cli", "optimize", task, "--backend", be.name, "--out",
               str(run_dir), *(extra_args or [])]
        earlier = _earlier_run(run_dir)
        if earlier == "finished":  # the batch died after the run, before results.json: keep the run
            p = subprocess.CompletedProcess(cmd, 0, "", "")
        else:
            if earlier == "interrupted":  # the batch died during the run: continue it from its checkpoint
                cmd = [sys.executable, "-m", "tritondx.cli", "resume", str(run_dir)]
            elif run_dir.exists():  # a run that died before its first checkpoint: nothing to keep
                shutil.rmtree(run_dir)
            # The child dies with this process (kill -9 included), so a resumed batch never races an
            # orphaned run on the same folder.
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=die_with_parent_fn())
        best = None
        rep = run_dir / "report.json"
        if rep.exists():
            best = (json.loads(rep.read_text()).get("best") or {}).get("path")
        final = _final_bench(task, best, be.name, final_rounds) if p.returncode == 0 else None
        return summarize_task(task, run_dir, p.returncode, time.time() - t0, final, p.stderr)

    bar = None
    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                       TimeElapsedColumn())
        bar.start()
        bar_id = bar.add_task("tritondx batch", total=len(tasks), completed=len(done))
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = {pool.submit(one, t): t for t in todo}
            for fut in as_completed(futures):
                entry = fut.result()
                with lock:
                    if entry["status"] != "skipped":
                        results.append(entry)
                        write_summary(out_dir, results, meta)
                if bar:
                    bar.update(bar_id, advance=1, description=f"{entry['task']}: "
                               + (f"{entry['speedup']:.2f}x" if entry.get("speedup") else entry["status"]))
    finally:
        if bar:
            bar.stop()
    return write_summary(out_dir, results, meta)
