"""Hardware counters through Nsight Compute (``ncu``), when it is installed.

The task's launcher runs in a sandboxed worker (job kind ``launch``; ncu inside its sandbox) under
``ncu --clock-control none --profile-from-start off --csv --page raw``, with only its last call inside the
profiler range (no input kernels, compiles or autotuning trials); the CSV gives, per kernel launch, DRAM and SM
throughput, achieved occupancy, L2 hit rate and warp-stall ratios. Clocks are left alone
(``--clock-control none``), as the device's owners ask.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from tritondx.tools.records.evidence import Finding, finding_id
from tritondx.tools.exec.gpulock import held_seconds, profiler

#: "READY_FD,GO_FD" (``profile_counters``; read in the job by ``tools/bench/launch.py``): the job says it is ready
#: (Python, torch and the task loaded, no CUDA call yet) and waits for the go, which comes once the profiler lock is
#: held: a batch's other ncu sessions do not wait for this one's start-up
GATE_ENV = "TRITONDX_LAUNCH_GATE_FDS"

log = structlog.get_logger(__name__)

METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
}
# Work the kernel did, counted by the hardware: DRAM bytes, and FLOPs from the executed FP instructions
# (an FMA counts 2, as in Nsight Compute's roofline sections) and from the tensor-core path's math ops.
WORK_METRICS = {
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
}
FLOP_METRICS = {  # metric -> FLOPs per counted instruction/op
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": 2,
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
    # "# of math ops executed in Tensor path": counted as FLOPs one for one; tests/gpu/test_measured_work.py
    # checks the total against 2*M*N*K of a tl.dot GEMM on the device
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 1,
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum": 1,
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 1,
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum": 1,
}
# Hopper's warp-group MMA (wgmma): the tensor-path op counters above read 0 on it (sm_90, ncu 2025.3), and
# its instructions do not map to FLOPs one for one (a wgmma's FLOPs depend on its N: m64nNk16), so a kernel
# that issues any has no hardware FLOP count (None); the IR's count stands. Asked for on sm_90 only (other
# chips' ncu has no such metric and would reject the whole metric list).
GMMA_METRIC = "sm__inst_executed_pipe_tensor_op_gmma.sum"
STALLS = ["long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "lg_throttle", "math_pipe_throttle",
          "wait", "not_selected", "memory_throttle", "no_instruction", "dispatch_stall", "membar", "branch_resolving",
          "drain", "sleeping", "tex_throttle", "imc_miss", "selected"]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def ncu_path() -> str | None:
    exe = shutil.which("ncu")
    if exe:
        return exe
    for cand in sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu")) + [Path("/usr/local/cuda/bin/ncu")]:
        if cand.exists():
            return str(cand)
    return None


@functools.lru_cache(maxsize=1)
def _arch_metrics() -> list[str]:
    """Metrics only some chips have (the wgmma instruction count), asked for where this host's ncu lists
    them for the GPU in use (an unknown name makes ncu reject the whole metric list)."""
    exe = ncu_path()
    try:
        cap = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        if not exe or not cap or not cap[0].startswith("9."):
            return []
        listed = subprocess.run([exe, "--query-metrics", "--chip", "gh100"], capture_output=True, text=True,
                                timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    base = GMMA_METRIC.rsplit(".", 1)[0]
    return [GMMA_METRIC] if any(ln.split()[:1] == [base] for ln in listed.splitlines()) else []


def parse_raw_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw``: the first row names the columns, the second their units."""
    start = next((i for i, ln in enumerate(text.splitlines()) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(text.splitlines()[start:]))))
    if len(rows) < 3:
        return []
    header, data = rows[0], rows[2:]
    out = []
    for r in data:
        rec = dict(zip(header, r))
        item: dict[str, Any] = {"kernel": rec.get("Kernel Name", "?"), "stalls": {}}
        for metric, key in {**METRICS, **WORK_METRICS}.items():
            if metric in rec:
                item[key] = _num(rec[metric])
        flops = [(_num(rec[m]), k) for m, k in FLOP_METRICS.items() if m in rec]
        gmma = _num(rec[GMMA_METRIC]) if GMMA_METRIC in rec else None
        if gmma:
            item["wgmma_instructions"] = int(gmma)
        elif flops and all(v is not None for v, _ in flops):
            item["flops"] = int(sum(v * k for v, k in flops))
        if item.get("dram_bytes_read") is not None and item.get("dram_bytes_write") is not None:
            item["dram_bytes"] = int(item["dram_bytes_read"] + item["dram_bytes_write"])
        for s in STALLS:
            m = STALL_METRIC.format(s)
            if m in rec and _num(rec[m]) is not None:
                item["stalls"][s] = _num(rec[m])
        out.append(item)
    return out


def _num(v: str) -> float | None:
    try:
        return float(v.replace(",", ""))
    except (ValueError, AttributeError):
        return None


#: ncu's line when another profiling session holds the device's counters (H200, 2026-12-01), e.g.
#: "==ERROR== Profiling failed because a driver resource was unavailable. Ensure that no other tool ..."
DRIVER_BUSY_RE = re.compile(r"driver resource was unavailable", re.I)


class NcuSession(BaseModel):
    """One profile of a task under ncu (every attempt: the gated one and its retry)."""

    rows: list[dict[str, Any]] = []
    note: str = ""                 # why there are no rows ("" when there are)
    device_seconds: float = 0.0    # the launch job's device lock held (its own ``device_usage``: cost, never evidence)
    profiler_seconds: float = 0.0  # the batch's profiler lock held by this session (no other ncu session meanwhile)
    #: the launch job's own steps, last attempt (``launch.run_launch``: load, gate wait, device wait, inputs, calls)
    steps: dict[str, float] = {}


def profile_counters(task_path: str, timeout: float = 600, launch_count: int = 6,
                     original: str | None = None) -> tuple[list[dict], str]:
    """(per-launch counters, note) of ``profile_session``."""
    s = profile_session(task_path, timeout, launch_count, original)
    return s.rows, s.note


def profile_session(task_path: str, timeout: float = 600, launch_count: int = 6,
                    original: str | None = None) -> NcuSession:
    """Run the task's launcher under ncu. The job's Python, torch and the task load before the profiler lock is taken
    (``GATE_ENV``); a gated session without counters (ncu found them taken: the task's import touched CUDA; the
    gate did not work) runs once more with the lock held from its start. ``original``: the run's original task; when
    ``task_path`` is that file, its compiles come from the task's trusted Triton cache layer (filled by the probe:
    ``triton_cache``), not done again while the profiler lock is held."""
    exe = ncu_path()
    if exe is None:
        return NcuSession(note="ncu not available: no hardware counters")
    cache: dict[str, str] = {}
    if original and Path(original).resolve() == Path(task_path).resolve():
        from tritondx.tools.exec import triton_cache
        if triton_cache.enabled():
            cache = triton_cache.reader_env(Path(original).read_text())
    cost: dict[str, Any] = {"device_s": 0.0, "profiler_s": 0.0}
    warm = _prewarm(task_path, cache, timeout, cost) if _wants_prewarm(task_path) else None
    try:
        rows, out, err, passed = _ncu_launch(exe, task_path, timeout, launch_count, gated=True, cache=cache, cost=cost,
                                             cache_dir=warm)
        if not rows and out is not None:
            # no counters through the gate (ncu found the counters taken: the task's import touched CUDA; the job ended
            # before its gate: the gate's descriptors did not reach it, or its import failed, which the probe has ruled
            # out for a task that got here): once more the way it ran before the gate, the lock held from the start
            why = "driver busy" if DRIVER_BUSY_RE.search(out + err) else "no counters" if passed else \
                "ended before the gate"
            log.info("ncu_gate_retry", task=Path(task_path).name, why=why)
            rows, out, err, _ = _ncu_launch(exe, task_path, timeout, launch_count, gated=False, cache=cache, cost=cost,
                                            cache_dir=warm)
    finally:
        if warm is not None:
            shutil.rmtree(warm, ignore_errors=True)
    spent = {"device_seconds": round(cost["device_s"], 3), "profiler_seconds": round(cost["profiler_s"], 3),
             "steps": {**(cost.get("steps") or {}), **({"prewarm_s": round(cost["prewarm_s"], 3)}
                                                       if "prewarm_s" in cost else {})}}
    if not rows:
        if out is None:
            return NcuSession(note=f"ncu did not finish within {timeout:.0f} s", **spent)
        tail = (err or out).strip().splitlines()[-3:]
        return NcuSession(note="ncu gave no counters: " + " | ".join(tail)[:400], **spent)
    return NcuSession(rows=rows, **spent)


#: when the profiled job's first call gets a prewarm job before the session (``_prewarm``): "auto" (a source that
#: autotunes, ``triton_cache.autotunes``), "1" always, "0" never
PREWARM_ENV = "TRITONDX_NCU_PREWARM"


def _wants_prewarm(task_path: str) -> bool:
    from tritondx.tools.exec.triton_cache import prewarm_wanted
    return prewarm_wanted(task_path, PREWARM_ENV)


def _prewarm(task_path: str, cache: dict[str, str], timeout: float, cost: dict[str, Any]) -> Path | None:
    """A plain ``launch`` job of ``task_path`` (one call, not under ncu, with the device lock as any job) whose Triton
    cache, compiles and autotuning results (``TRITON_CACHE_AUTOTUNING``), is kept in a host folder: the session under
    ncu then starts from it, and its first call under the profiler lock finds them instead of benchmarking every
    autotune config there (the corpus batch of 2026-12-03: that first call was 116 s of the profile tier's 186 s
    under the lock, 45.8 s for one autotuned int4 matmul). The folder belongs to this source alone: the job that
    wrote it ran the same code the session runs. None when the job failed (the session then compiles as before);
    its wall and device seconds go to ``cost`` (``prewarm_s``, ``device_s``)."""
    from tritondx.tools.exec.sandbox import run_job
    from tritondx.tools.exec.triton_cache import AUTOTUNE_CACHE_ENV
    folder = Path(tempfile.mkdtemp(prefix="tritondx-ncu-prewarm-"))
    job = {"kind": "launch", "task": str(Path(task_path).resolve()), "device": "cuda", "repeat": 1}
    t0 = time.monotonic()
    r = run_job(job, timeout=timeout, env={**cache, AUTOTUNE_CACHE_ENV: "1"}, gpu_lock=True, cache_dir=folder)
    cost["prewarm_s"] = cost.get("prewarm_s", 0.0) + time.monotonic() - t0
    try:
        cost["device_s"] = cost.get("device_s", 0.0) + held_seconds((r.result or {}).get("device_usage"))
    except (TypeError, ValueError):
        pass
    if not r.ok:
        log.info("ncu_prewarm_failed", task=Path(task_path).name, kind=r.kind)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def _ncu_launch(exe: str, task_path: str, timeout: float, launch_count: int, gated: bool,
                cache: dict[str, str] | None = None, cost: dict[str, float] | None = None,
                cache_dir: Path | None = None):
    """One ncu session over a ``launch`` job of ``task_path``: (rows, stdout, stderr, past the gate); stdout None on a
    timeout. ``gated``: the profiler lock is taken once the job says it is ready (``launch._gate``), else before it
    starts (then always "past the gate").

    ncu runs **inside** the job's sandbox (``sandbox.prepare(wrap=...)``), as every job does: ``task_path`` may be a
    candidate (the profile tier's best so far), and what it runs must see the file system read-only but for the job's
    scratch folder, which goes with the job. The job takes the batch's device lock through descriptors handed to it
    (``gpulock.job_lock_fds``), as the gate's pipes are, through ncu. ncu's CSV comes on the job's stdout, which the
    profiled process shares: counters are diagnosis, never a verdict (the verdict's hardware check is ``hwcheck``).
    ``cost``: ``device_s`` (the job's device lock held, from its result) and ``profiler_s`` are added to it.
    ``cache_dir``: the job's Triton cache (a prewarm job's of the same source, ``_prewarm``), autotuning results
    read from it too."""
    from tritondx.tools.exec import sandbox
    from tritondx.tools.exec.gpulock import job_lock_fds
    job = {"kind": "launch", "task": str(Path(task_path).resolve()), "device": "cuda", "repeat": 2,
           "profile_last": True}
    metrics = ",".join(list(METRICS) + list(WORK_METRICS) + list(FLOP_METRICS) + _arch_metrics()
                       + [STALL_METRIC.format(s) for s in STALLS])
    wrap = [exe, "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
            "--csv", "--page", "raw", "--launch-count", str(launch_count), "--metrics", metrics]
    # ncu's own folder: a script (``ncu`` on PATH) and the install it runs from
    reads = sorted({str(Path(exe).parent), str(Path(os.path.realpath(exe)).parent.parent)})
    deadline = time.monotonic() + timeout
    logs = Path(tempfile.mkdtemp(prefix="tritondx-ncu-"))   # ncu's output: host files outside the job's view
    out_f, err_f = open(logs / "ncu.out", "w+"), open(logs / "ncu.err", "w+")
    gate_fds: tuple[int, ...] = ()
    from tritondx.tools.exec.triton_cache import AUTOTUNE_CACHE_ENV
    env = dict(cache or {})   # the trusted layer, read only (the job's own compiles go to its scratch folder)
    if cache_dir is not None:
        env[AUTOTUNE_CACHE_ENV] = "1"
    go_w = -1
    if gated:
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        env[GATE_ENV] = f"{ready_w},{go_r}"
        gate_fds = (ready_w, go_r)
    proc = None
    ready = not gated
    launch = None
    held_from: float | None = None
    try:
        with job_lock_fds() as (lock_fds, lock_env):
            launch = sandbox.prepare(job, ["job.json", "result.json"], None, {**env, **lock_env}, wrap=wrap,
                                     reads=reads, cache_dir=cache_dir)
            if not gated:
                with profiler():   # one ncu session at a time on the device (gpulock.profiler)
                    held_from = time.monotonic()
                    proc = sandbox.start(launch, out_f, err_f, lock_fds)
                    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            else:
                proc = sandbox.start(launch, out_f, err_f, (*gate_fds, *lock_fds))
                os.close(ready_w)
                os.close(go_r)
                ready = _wait_ready(ready_r, proc, min(deadline, time.monotonic() + READY_WITHIN_S))
                os.close(ready_r)
                if ready:
                    with profiler():
                        held_from = time.monotonic()
                        os.write(go_w, b"g")
                        os.close(go_w)
                        go_w = -1
                        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                else:   # it ended before the gate, or cannot say it is ready: ended now, before any CUDA call
                    sandbox.kill(proc, launch.iso)
            if not launch.iso.pids:   # whatever the job left in its session
                sandbox.kill(proc, launch.iso)
    except subprocess.TimeoutExpired:
        sandbox.kill(proc, launch.iso)
        return [], None, "", ready
    finally:
        if go_w >= 0:
            os.close(go_w)
        if cost is not None and launch is not None:
            if held_from is not None:
                cost["profiler_s"] = cost.get("profiler_s", 0.0) + time.monotonic() - held_from
            answer = _job_answer(launch.scratch / "result.json")
            usage = answer.get("device_usage")
            try:
                cost["device_s"] = cost.get("device_s", 0.0) + held_seconds(usage if isinstance(usage, dict) else None)
            except (TypeError, ValueError):
                pass
            if isinstance(answer.get("steps"), dict):
                cost["steps"] = {str(k): float(v) for k, v in answer["steps"].items()
                                 if isinstance(v, (int, float))}
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
        out_f.close()
        err_f.close()
        shutil.rmtree(logs, ignore_errors=True)
        if launch is not None:
            shutil.rmtree(launch.scratch, ignore_errors=True)
    return parse_raw_csv(out), out, err, ready


def _job_answer(result: Path) -> dict[str, Any]:
    """The launch job's result (the worker adds ``device_usage``: its device lock held), {} without one. The job may
    run a candidate, which could write that file: cost figures, never evidence."""
    try:
        if result.is_file() and not result.is_symlink() and result.stat().st_size < 1 << 20:
            answer = json.loads(result.read_text())
            return answer if isinstance(answer, dict) else {}
    except (OSError, ValueError):
        pass
    return {}


#: seconds a gated launch job gets to say it is ready (its Python, torch and task loaded): past them it is ended and
#: run the old way
READY_WITHIN_S = 180.0


def _wait_ready(fd: int, proc: subprocess.Popen, deadline: float) -> bool:
    """Whether the gated job said it is ready before ``deadline`` (False: it ended first, or time ran out)."""
    import select
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], min(1.0, max(0.0, deadline - time.monotonic())))
        if r:
            return os.read(fd, 1) == b"r"
        if proc.poll() is not None:
            return False
    return False


def first_per_kernel(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any], list[tuple[str, float]]]]:
    """(index, row, top three stalls) for the first profiled launch of each kernel (repeats only
    confirm it)."""
    out, seen = [], set()
    for i, row in enumerate(rows):
        if row["kernel"] not in seen:
            seen.add(row["kernel"])
            out.append((i, row, sorted(row.get("stalls", {}).items(), key=lambda kv: -kv[1])[:3]))
    return out


def measured_work(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """FLOPs and DRAM bytes of one launcher call: the first profiled launch of each kernel, summed
    (a figure is None when ncu did not give it for every kernel)."""
    firsts = [row for _, row, _ in first_per_kernel(rows)]

    def total(key: str) -> int | None:
        vals = [r.get(key) for r in firsts]
        return None if not firsts or any(v is None for v in vals) else int(sum(vals))
    out = {"flops": total("flops"), "dram_bytes": total("dram_bytes"), "kernels": len(firsts)}
    wgmma = [r["kernel"][:60] for r in firsts if r.get("wgmma_instructions")]
    if wgmma:
        out["flops_note"] = (f"no hardware FLOP count: {', '.join(wgmma)} issue(s) wgmma, which the tensor-path "
                             "op counters do not count")
    return out


def counter_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kernel: the counters a reader compares between initial and best (the report's table)."""
    return [{"kernel": row["kernel"][:80], **{k: row.get(k) for k in (
        "duration_ns", "dram_pct", "sm_pct", "achieved_occupancy_pct", "l2_hit_pct", "dram_bytes", "flops")},
        "top_stalls": [[k, round(v, 3)] for k, v in stalls]} for _, row, stalls in first_per_kernel(rows)]


def counter_findings(rows: list[dict[str, Any]]) -> list[Finding]:
    """One finding per kernel (the first profiled launch of each)."""
    out = []
    for i, row, stalls in first_per_kernel(rows):
        metric = {k: row[k] for k in ("dram_pct", "sm_pct", "achieved_occupancy_pct", "l2_hit_pct", "duration_ns")
                  if row.get(k) is not None}
        metric.update({f"stall_{k}": round(v, 3) for k, v in stalls})
        top = ", ".join(f"{k} {v:.2f}" for k, v in stalls) or "n/a"
        msg = (f"ncu: DRAM {row.get('dram_pct', 0):.0f}% / SM {row.get('sm_pct', 0):.0f}% of peak, achieved occupancy "
               f"{row.get('achieved_occupancy_pct', 0):.0f}%, L2 hit {row.get('l2_hit_pct', 0):.0f}%; top stalls: {top}")
        suggests = []
        if stalls and stalls[0][0] in ("long_scoreboard", "lg_throttle") and (row.get("dram_pct") or 0) < 60:
            suggests = ["launch_config", "pipelining", "alignment_hints"]
        elif (row.get("achieved_occupancy_pct") or 100) < 25:
            suggests = ["launch_config"]
        out.append(Finding(id=finding_id("ncu_counters", row["kernel"], i), detector="ncu_counters", tier="profile",
                           stage="ncu", kernel=row["kernel"][:80], severity="info" if not suggests else "medium",
                           message=msg, metric=metric, suggests=suggests))
    return out


def ncu_available_note() -> str:
    return "ncu found" if ncu_path() else "ncu not installed"


if __name__ == "__main__":  # manual use: python -m tritondx.tools.evidence.ncu TASK.py
    rows, note = profile_counters(sys.argv[1])
    print(json.dumps({"rows": rows, "note": note}, indent=1))
    os._exit(0)
