"""Every rewrite family on its showcase task: optimize each one, collect family -> kernel -> measured speedup.

Usage (device, after ``source bench/scripts/device_env.sh``):
    python3 bench/scripts/run_families.py OUT_DIR [--backend cuda] [--jobs 4] [--timeout 300] [--deadline S]
                                          [--candidates 8] [--max-rounds 1] [--only FAM,FAM]
                                          [--results DIR ...]

Each task runs ``python -m tritondx.cli optimize TASK --all-tiers --max-rounds 1`` (as run_examples.py does):
every tier's evidence is gathered first, then ONE rewrite round whose candidates all build on the initial
kernel, so each candidate's measured speedup is the gain of its own family alone. ``--candidates`` sets
TRITONDX_CANDIDATES_PER_ROUND (8: the configuration-search families come after the structural ones, and
autotune comes last). Nsight Compute is off unless set in the environment (TRITONDX_NCU=0,
TRITONDX_FINAL_PROFILE=0): the profile tier times the kernel only.
Several tasks run at once (``--jobs``); TRITONDX_LOCK_DIR serialises their timing on the GPU.

Writes OUT_DIR/families.json and OUT_DIR/families.md: for every family, the showcase task, the candidate of
that family with the best measured speedup over the initial kernel (report.json candidates[*].measurement),
whether it passed verification, and device / torch / triton / date. ``--results DIR`` adds the families that
fired in earlier runs (any report.json below DIR, e.g. a suite batch folder) to a second table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: family -> showcase task (bench/families/<family>.py unless an existing task already is the best showcase),
#: slowest first (they start first when tasks run in parallel)
FAMILY_TASKS = {
    "persistent": "bench/suite/l3_grouped_matmul.py",
    "grouped_ordering": "bench/families/grouped_ordering.py",
    "pipelining": "bench/families/pipelining.py",
    "split_k": "bench/families/split_k.py",
    "mask_removal": "bench/families/mask_removal.py",
    "fuse_passes": "examples/softmax_three_pass.py",
    "tl_dot": "examples/matmul_no_dot.py",
    "fuse_launches": "bench/families/fuse_launches.py",
    "launch_config": "examples/add_tiny_block.py",
    "alignment_hints": "bench/families/alignment_hints.py",
    "index_width": "bench/families/index_width.py",
    "autotune": "bench/families/autotune.py",
    "vectorize_scalar_loop": "bench/families/vectorize_scalar_loop.py",
    "tile_2d": "bench/families/tile_2d.py",
    "strided_args": "bench/families/strided_args.py",
    "cheap_math": "bench/families/cheap_math.py",
    "grid_to_cores": "bench/families/grid_to_cores.py",
    "causal_split": "bench/families/causal_split.py",
    "autotune_widen": "bench/families/autotune_widen.py",
    "grid_per_item": "bench/families/grid_per_item.py",
    "rows_per_program": "bench/families/rows_per_program.py",
    "flat_tiles": "bench/families/flat_tiles.py",
    "split_reduction": "bench/families/split_reduction.py",
    "absmax_norm": "bench/families/absmax_norm.py",
    "clone_fold": "bench/families/clone_fold.py",
    "deinterleave": "bench/families/deinterleave.py",
}
#: table order
ORDER = ["launch_config", "tl_dot", "fuse_passes", "fuse_launches", "vectorize_scalar_loop", "split_k",
         "grouped_ordering", "pipelining", "persistent", "mask_removal", "index_width", "alignment_hints", "autotune",
         "tile_2d", "strided_args", "cheap_math", "grid_to_cores", "causal_split", "autotune_widen",
         "grid_per_item", "rows_per_program", "flat_tiles", "split_reduction", "absmax_norm", "clone_fold",
         "deinterleave"]


def run_one(family: str, task: str, out: Path, args, deadline: float) -> dict:
    run = out / "runs" / family
    timeout = min(args.timeout, deadline - time.time())
    if timeout < 20:
        print(f"{family}: skipped (deadline)", flush=True)
        return {"family": family, "task": task, "exit": "skipped (deadline)", "wall_s": 0.0, "stderr_tail": ""}
    env = dict(os.environ, TRITONDX_LOCK_DIR=os.environ.get("TRITONDX_LOCK_DIR") or str(out / ".locks"),
               TRITONDX_CANDIDATES_PER_ROUND=str(args.candidates), PYTHONUNBUFFERED="1")
    # no Nsight Compute (profile tier and final report profile): ~20 s of exclusive device time per task
    env.setdefault("TRITONDX_NCU", "0")
    env.setdefault("TRITONDX_FINAL_PROFILE", "0")
    cmd = [sys.executable, "-m", "tritondx.cli", "optimize", task, "--backend", args.backend, "--out", str(run),
           "--all-tiers", "--max-rounds", str(args.max_rounds)]
    t0 = time.time()
    # own process group: a timeout ends the CLI and the sandboxed workers it started, nothing else
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        code = "timeout"
    entry = {"family": family, "task": task, "exit": code, "wall_s": round(time.time() - t0, 1),
             "stdout_tail": stdout[-800:], "stderr_tail": stderr[-1500:] if code != 0 else ""}
    rep = run / "report.json"
    if rep.exists():
        entry.update(summarize(json.loads(rep.read_text())))
    print(f"{family}: {task} exit={code} wall={entry['wall_s']:.0f}s "
          f"fired={sorted(entry.get('fired', {}))}", flush=True)
    return entry


def summarize(r: dict) -> dict:
    """Per family that produced a candidate in this run: its best verified, measured candidate."""
    meas = {m["id"]: m for m in r.get("measurements", []) if m.get("family") != "initial"}
    findings = {f["id"]: f for f in r.get("findings", [])}
    fired: dict[str, dict] = {}
    for c in r.get("candidates", []):
        m = c.get("measurement") or meas.get(c["id"]) or {}
        row = {"candidate": c["id"], "verified": bool(c.get("verified")), "speedup": m.get("speedup"),
               "vs_best": m.get("vs_best"), "median_ms": m.get("median_ms"), "baseline_ms": m.get("baseline_ms"),
               "params": c.get("params"), "rejection": c.get("rejection") or c.get("reason"),
               "motivated_by": c.get("motivated_by", []),
               "tiers": sorted({findings[i]["tier"] for i in c.get("motivated_by", []) if i in findings})}
        cur = fired.get(c["family"])
        if cur is None or _key(row) > _key(cur):
            fired[c["family"]] = row
        fired[c["family"]].setdefault("candidates", 0)
        fired[c["family"]]["candidates"] += 1
    return {"name": r.get("task"), "speed": r.get("speed"), "best": (r.get("best") or {}).get("id"),
            "best_speedup": r.get("speedup"), "tiers_used": r.get("tiers_used"), "rounds": r.get("rounds"),
            "fired": fired}


def _key(row: dict) -> tuple:
    return (row["verified"], row["speedup"] is not None, row["speedup"] or 0.0)


def collect_results(dirs: list[str]) -> list[dict]:
    rows = []
    for d in dirs:
        for rep in sorted(Path(d).rglob("report.json")):
            try:
                s = summarize(json.loads(rep.read_text()))
            except (ValueError, KeyError):
                continue
            for fam, row in s["fired"].items():
                if row["speedup"] is not None and row["verified"]:
                    rows.append({"family": fam, "task": s["name"], "report": str(rep), **row})
    return rows


def meta(backend: str) -> dict:
    import torch
    import triton
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu ({backend})"
    return {"device": dev, "backend": backend, "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _fmt(x, spec=".2f", suffix="x"):
    return "not measured" if x is None else f"{x:{spec}}{suffix}"


def markdown(doc: dict) -> str:
    m = doc["meta"]
    lines = [f"# Rewrite families: measured gains ({m['device']})", "",
             f"{m['date']}; torch {m['torch']}, triton {m['triton']}; backend {m['backend']}; "
             f"`optimize --all-tiers --max-rounds {doc['args']['max_rounds']}`, "
             f"{doc['args']['candidates']} candidates per round: every candidate builds on the initial kernel, "
             "so each speedup is its own family's gain over the initial kernel.", "",
             "| family | kernel (task) | candidate | speedup vs initial | verified | motivated by (tier: detector) |",
             "|---|---|---|---|---|---|"]
    for fam, row in doc["families"].items():
        if row.get("candidate") is None:
            why = row.get("note") or "did not fire"
            lines.append(f"| {fam} | `{row['task']}` | - | - | - | {why} |")
            continue
        mot = ", ".join(sorted({f"{t}" for t in row.get("tiers", [])})) or "-"
        dets = ", ".join(sorted({i.split(':')[0] for i in row.get("motivated_by", [])}))
        lines.append(f"| {fam} | `{row['task']}` | {row['candidate']} | {_fmt(row['speedup'])} | "
                     f"{'yes' if row['verified'] else 'no'} | {mot}: {dets} |")
    extra = doc.get("other_runs") or []
    if extra:
        lines += ["", "## Families in other runs (--results)", "",
                  "| family | task | candidate | speedup vs initial | report |", "|---|---|---|---|---|"]
        best: dict[str, dict] = {}
        for r in extra:
            if r["family"] not in best or (r["speedup"] or 0) > (best[r["family"]]["speedup"] or 0):
                best[r["family"]] = r
        for fam in sorted(best):
            r = best[fam]
            lines.append(f"| {fam} | {r['task']} | {r['candidate']} | {_fmt(r['speedup'])} | `{r['report']}` |")
    lines += ["", "## Runs", "", "| family | task | exit | wall s | families fired (best speedup) |",
              "|---|---|---|---|---|"]
    for e in doc["runs"]:
        fired = ", ".join(f"{f} {_fmt(v['speedup'])}" for f, v in sorted(e.get("fired", {}).items()))
        lines.append(f"| {e['family']} | `{e['task']}` | {e['exit']} | {e['wall_s']:.0f} | {fired or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--jobs", type=int, default=4, help="tasks optimized at once")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per task (the CLI is killed after)")
    ap.add_argument("--candidates", type=int, default=8, help="TRITONDX_CANDIDATES_PER_ROUND")
    ap.add_argument("--max-rounds", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=0, help="seconds for the whole batch (0: none); running "
                                                               "tasks are cut to fit, later ones skipped")
    ap.add_argument("--only", default="", help="comma-separated families")
    ap.add_argument("--results", nargs="*", default=[], help="folders with earlier report.json files")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    (out / ".locks").mkdir(parents=True, exist_ok=True)
    only = [f for f in args.only.split(",") if f]
    todo = [(f, t) for f, t in FAMILY_TASKS.items() if not only or f in only]
    os.chdir(REPO)
    t0 = time.time()
    deadline = t0 + (args.deadline or 1e9)
    runs: list[dict] = []
    lock = threading.Lock()

    def one(ft):
        e = run_one(ft[0], ft[1], out, args, deadline)
        with lock:
            runs.append(e)
            write(out, args, runs, t0)   # after every task: a killed batch still leaves its table
        return e

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    doc = write(out, args, runs, t0)
    print(markdown(doc))
    print(f"total wall {doc['wall_s']:.0f}s", flush=True)
    return 0


def write(out: Path, args, runs: list[dict], t0: float) -> dict:
    runs = sorted(runs, key=lambda e: ORDER.index(e["family"]) if e["family"] in ORDER else len(ORDER))
    families = {}
    for e in runs:
        row = e.get("fired", {}).get(e["family"])
        if row is None:
            note = ("run failed: " + (e["stderr_tail"].strip().splitlines() or ["?"])[-1][:200]
                    if e["exit"] != 0 else "the expert did not propose it")
            families[e["family"]] = {"task": e["task"], "candidate": None, "note": note}
        else:
            families[e["family"]] = {"task": e["task"], **row}
    doc = {"meta": meta(args.backend), "args": vars(args), "wall_s": round(time.time() - t0, 1),
           "families": families, "runs": runs, "other_runs": collect_results(args.results)}
    (out / "families.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / "families.md").write_text(markdown(doc))
    return doc


if __name__ == "__main__":
    sys.exit(main())
