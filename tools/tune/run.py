"""The tuner, orchestrator side: knobs (static), one sandboxed ``tune`` job, the winners as readable sources.

``tune_task(task, folder, backend)`` returns a ``TuneResult``: the launches found by running the task, the
knobs searched and those left alone (and why), every configuration tried (screened out and why), and the winners,
each written as a candidate source where every value is changed where it is defined. Only winners that beat the
initial kernel in the job's interleaved final timing by more than its measured spread become candidates; the
verifier's full checks and bench decide whether one is kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from tritondx.tools.backends.base import Backend
from tritondx.tools.tune import space as spacemod
from tritondx.tools.tune.knob import split

log = structlog.get_logger(__name__)

#: the job's search budget (device-job seconds after its set-up) and its hard timeout
DEFAULT_BUDGET_S = 45.0
#: at most this many winners become candidates
MAX_WINNERS = 2
#: a winner must beat the initial kernel by this much (and by the final timing's spread)
MIN_GAIN = 1.03
#: runs of the job again after a configuration killed its process (a fault, a segfault, a hang)
FAULT_RETRIES = 2


def _read_progress(path: Path) -> tuple[list[dict], dict | None]:
    """The trials a dead job finished, and the configuration it was running when it died (None: none)."""
    done: list[dict] = []
    started: dict | None = None
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return [], None
    for ln in lines:
        try:
            rec = json.loads(ln)
        except json.JSONDecodeError:
            continue
        if rec.get("kind") == "start" and isinstance(rec.get("config"), dict):
            started = {k: int(v) for k, v in rec["config"].items()}
        elif rec.get("kind") == "trial":
            done.append({k: rec[k] for k in ("config", "status", "ms", "note", "phase") if k in rec})
            started = None
    return done, started


class Winner(BaseModel):
    config: dict[str, int]
    label: str                       # "BLOCK_M 128->1, num_warps 4->8"
    median_ms: float
    initial_ms: float
    speedup: float
    spread: float
    source: str = ""
    #: what ``initial_ms`` timed: "" (the initial kernel or its launched configuration), else the label of the
    #: autotuner's own configuration that was fastest (``final.autotuner_configs``)
    against: str = ""


class TuneResult(BaseModel):
    ran: bool = False
    timed: bool = False
    error: str = ""
    launches: list[dict[str, Any]] = Field(default_factory=list)
    hot: list[str] = Field(default_factory=list)
    knobs: list[dict[str, Any]] = Field(default_factory=list)
    skipped: list[dict[str, Any]] = Field(default_factory=list)
    trials: list[dict[str, Any]] = Field(default_factory=list)
    final: dict[str, Any] = Field(default_factory=dict)
    winners: list[Winner] = Field(default_factory=list)
    values: dict[str, Any] = Field(default_factory=dict)   # each knob's value as launched (where one was recorded)
    seconds: float = 0.0
    device_seconds: float = 0.0
    budget_s: float = 0.0
    precompiled: dict[str, Any] = Field(default_factory=dict)   # the job's compiles ahead (``job.Precompiler``)
    waves: dict[str, Any] = Field(default_factory=dict)         # configurations per hold (``job.Waves``)
    device_usage: dict[str, Any] = Field(default_factory=dict)  # the job's holds and lock waits (``gpulock.usage``)
    marks: dict[str, float] = Field(default_factory=dict)       # job seconds at the end of: loaded, recorded, searched, final
    search: dict[str, Any] = Field(default_factory=dict)        # why the search ended, its seconds waiting for the device

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.trials:
            out[t["status"]] = out.get(t["status"], 0) + 1
        return out


#: a shape knob (a tile, a grid or count value: what indexes memory) in this many faulted configurations is kept as
#: launched in the job run again: H100 corpus batch_r of 2026-12-06, lightning_attn2's ``BLOCK_MODEL`` (its kernel
#: indexes ``v`` and the output without a mask on it): its changed values faulted all three attempts, and the search
#: that had found ``num_stages 5`` (1.07x, batch_p) never ran
FAULTS_TO_DROP = 2
SHAPE_KINDS = ("tile", "grid", "count")
#: the job's fault class that counts toward ``FAULTS_TO_DROP`` (a hang or a crash says nothing of an index)
ADDRESS_FAULT = "illegal_memory_access"


def drop_faulting(knobs: list[dict[str, Any]], faulted: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``knobs`` without the shape knobs changed in ``FAULTS_TO_DROP`` or more of the ``faulted`` configurations (the
    ones that ended in an illegal address), and the keys of those dropped (warps and stages do not move an index:
    never dropped)."""
    strikes: dict[str, int] = {}
    for cfg in faulted:
        for key in cfg:
            strikes[key] = strikes.get(key, 0) + 1
    drop = [k["key"] for k in knobs if k.get("kind") in SHAPE_KINDS and strikes.get(k["key"], 0) >= FAULTS_TO_DROP]
    return [k for k in knobs if k["key"] not in drop], drop


def retry_budget(budget_s: float, faulted_s: float) -> float:
    """The search budget of the job run again without a faulted configuration: what is left, but at least half:
    the faulted job's seconds include a hang's watchdog (45 s) or a crash's restart, not search (H100 batch_j of
    2026-12-05: slora_context_attn_nopad's retry got 5 s after a 45 s compile hang, and its search ended at once)."""
    return max(5.0, budget_s - faulted_s, budget_s / 2)


def tune_task(task_path: str, folder: Path, backend: Backend, budget_s: float = DEFAULT_BUDGET_S,
              timeout: float | None = None, extend: bool = True, wall_cap_s: float | None = None) -> TuneResult:
    """One tune job for ``task_path`` (the search's budget ``budget_s``, its own seconds; ``extend``: it may stretch
    while improving, ``search.EXTEND``; ``wall_cap_s``: the search's wall time at most, else ``job.WALL_CAP``
    budgets)."""
    from tritondx.tools.exec.jobs import job_error, run_device_job
    source = Path(task_path).read_text()
    try:
        space = spacemod.build(source)
        instrumented = spacemod.instrument(source)
    except Exception as exc:   # a source the analysis cannot read: no search, the run goes on
        return TuneResult(error=f"launch analysis failed: {type(exc).__name__}: {exc}"[:300])
    out = TuneResult(knobs=[k.model_dump() for k in space.knobs], skipped=[s.model_dump() for s in space.skipped],
                     budget_s=budget_s)
    if not space.knobs:
        out.error = "no tunable launch value (see skipped)" if space.skipped else "no launch found from launch()"
    folder.mkdir(parents=True, exist_ok=True)
    inst = folder / "instrumented_task.py"
    inst.write_text(instrumented)
    progress = folder / "progress" / "progress.jsonl"   # its own folder: the job's write-back stage replaces it
    progress.parent.mkdir(exist_ok=True)
    job = {"kind": "tune", "task": str(Path(task_path).resolve()), "instrumented": str(inst.resolve()),
           "knobs": out.knobs, "budget_s": budget_s if backend.can_time else min(budget_s, 60.0),
           "device": backend.torch_device, "progress_file": str(progress.resolve()), "known": [],
           **({} if extend else {"extend": 1.0}), **({"wall_cap_s": wall_cap_s} if wall_cap_s else {})}
    # the initial kernel's compiles from the probe (the trusted cache layer, read-only here): an autotuned kernel's
    # job otherwise compiled its configs again one after another before it searched (an int4 matmul over 36
    # configs: tune jobs of 119-129 s for a 25 s search, H200 corpus batches of 2026-12-04/05)
    from tritondx.tools.exec import triton_cache
    cache_env = triton_cache.reader_env(source) if triton_cache.enabled() else {}
    for attempt in range(1 + FAULT_RETRIES):
        progress.write_text("")
        limit = timeout or (max(budget_s * 3, wall_cap_s or 0.0) + 120)
        r, seconds, device_s = run_device_job(job, backend, limit, extra_env=cache_env)
        out.seconds, out.device_seconds = round(out.seconds + seconds, 2), round(out.device_seconds + device_s, 2)
        if r.ok and r.result and r.result.get("ok"):
            break
        klass, reason = job_error(r)
        done, faulted = _read_progress(progress)
        if faulted is None:     # it died outside any configuration (loading, recording): nothing to skip
            out.error = f"tune job: {klass}: {reason}"[:400]
            (folder / "tune.json").write_text(out.model_dump_json(indent=1))
            return out
        log.info("tune_config_fault", config=faulted, klass=klass, reason=reason[:160], attempt=attempt + 1)
        job["known"] = job["known"] + done + [{"config": faulted, "status": "failed", "phase": "fault",
                                                "note": f"{klass}: {reason}"[:300]}]
        job["budget_s"] = retry_budget(job["budget_s"], seconds)
        job["knobs"], dropped = drop_faulting(job["knobs"], [k["config"] for k in job["known"] if k["phase"] == "fault"
                                                             and k["note"].startswith(ADDRESS_FAULT)])
        if dropped:   # what the earlier attempts measured with those knobs changed is no configuration of this one
            job["known"] = [k for k in job["known"] if not set(k["config"]) & set(dropped)]
            log.info("tune_knobs_dropped", knobs=dropped, faults=FAULTS_TO_DROP)
            out.skipped += [{"param": k, "why": f"its changed values faulted {FAULTS_TO_DROP} times (an index past "
                                                "a tensor's end): kept as launched"} for k in dropped]
    else:
        out.error = f"tune job: {FAULT_RETRIES + 1} attempts ended in faults"
        (folder / "tune.json").write_text(out.model_dump_json(indent=1))
        return out
    res = r.result
    out.ran, out.timed = True, bool(res.get("timed"))
    out.launches, out.hot, out.trials, out.final = res["launches"], res["hot"], res["trials"], res.get("final", {})
    out.precompiled = res.get("precompiled") or {}
    out.waves, out.device_usage = res.get("waves") or {}, res.get("device_usage") or {}
    out.marks = res.get("marks") or {}
    out.search = res.get("search") or {}
    values = out.values = {k: v for k, v in (res.get("launched_values") or {}).items() if v is not None}
    init = out.final.get("initial")
    if out.timed and init:
        # the initial kernel, the configuration as launched where it timed faster (a noisy round), or an autotuner's
        # own configuration (``final.autotuner_configs``: its pick differs between processes): a winner is held to the
        # fastest of them
        same = [v for v in out.final.values() if not v["config"] or v.get("baseline")]
        base = min(v["median_ms"] for v in same)
        init = min(same, key=lambda v: v["median_ms"])
        ranked = sorted((v for k, v in out.final.items() if k != "initial"), key=lambda v: v["median_ms"])
        for v in ranked:
            if v["timed_output"] != "equal" or not v["config"] or v.get("baseline"):
                continue
            noise = max(v["spread"], init["spread"], MIN_GAIN - 1)
            if base / v["median_ms"] < 1 + noise:
                continue
            try:
                src = spacemod.emit(source, v["config"], res.get("launched_values") or {}, out.launches)
            except Exception as exc:  # noqa: BLE001 - an emit that fails loses this winner only
                log.warning("tune_emit_failed", config=v["config"], error=str(exc)[:200])
                continue
            against = spacemod.describe(space, init["config"], values) if init.get("baseline") else ""
            out.winners.append(Winner(config=v["config"], label=spacemod.describe(space, v["config"], values),
                                      median_ms=v["median_ms"], initial_ms=base, speedup=base / v["median_ms"],
                                      spread=v["spread"], source=src, against=against))
            if len(out.winners) >= MAX_WINNERS:
                break
    (folder / "tune.json").write_text(json.dumps({**out.model_dump(exclude={"winners"}),
                                                  "winners": [w.model_dump(exclude={"source"})
                                                              for w in out.winners]}, indent=1, default=str))
    return out


def table(res: TuneResult, limit: int = 5) -> str:
    """The search as one compact markdown block: launches, knobs, configurations tried/screened out, best few."""
    if not res.ran:
        return f"Launch tuner: not run ({res.error})." if res.error else ""
    lines = []
    launch_bits = [f"`{l['kernel']}` grid {'x'.join(map(str, l['grid'])) or '?'} x{l['calls']}"
                   + (f" ({100 * l['share']:.0f}% of device time)" if res.timed else "") for l in res.launches[:4]]
    lines.append("Launches found by running `launch()`: " + "; ".join(launch_bits) + ".")
    if res.knobs:
        lines.append("Knobs: " + ", ".join(f"{k['key']} ({k['kind']})" for k in res.knobs
                                           if any(p.split('.', 1)[0] in res.hot for p in k['params'])) + "; left alone: "
                     + (", ".join(f"{s['param']} ({s['why'][:50]})" for s in res.skipped[:4]) or "none") + ".")
    c = res.counts()
    lines.append(f"Configurations: {len(res.trials)} tried in one job ({res.seconds:.0f} s, budget {res.budget_s:.0f} s): "
                 + ", ".join(f"{n} {s}" for s, n in sorted(c.items())) + "."
                 + ("" if res.timed else " Speed not measured (no GPU): configurations were checked for "
                                         "correctness only.")
                 + (f" Timed in {res.waves['waves']} waves (one shared and one exclusive hold each)."
                    if res.waves.get("waves") else "")
                 + (f" Compiled ahead in threads: {res.precompiled.get('compiled', 0)} of "
                    f"{res.precompiled.get('submitted', 0)}." if res.precompiled.get("submitted") else ""))
    fails = [t for t in res.trials if t["status"] == "failed" and t.get("note")]
    if fails:
        lines.append("Screened out, e.g.: " + "; ".join(f"{_cfg(res, t['config'])}: {t['note'][:80]}" for t in fails[:2]) + ".")
    if res.timed and res.final:
        lines.append("")
        lines.append("| configuration | median (ms) | vs initial | spread | timed output |")
        lines.append("|---|---|---|---|---|")
        init = res.final.get("initial", {}).get("median_ms")
        rows = sorted(res.final.items(), key=lambda kv: kv[1]["median_ms"])[:limit + 1]
        for k, v in rows:
            ratio = f"{init / v['median_ms']:.2f}x" if init else "-"
            name = "initial" if k == "initial" else _cfg(res, v["config"]) + (" (the autotuner's own)"
                                                                                if v.get("baseline") else "")
            lines.append(f"| {name} | {v['median_ms']:.4f} | {ratio} | "
                         f"{100 * v['spread']:.0f}% | {v['timed_output'][:40]} |")
    return "\n".join(lines)


def _cfg(res: TuneResult, cfg: dict[str, int]) -> str:
    """``BLOCK_M=16, num_warps=8``: a scale knob's value where the launch or the source gives it, else ``x2^k``."""
    knobs = {k["key"]: k for k in res.knobs}
    parts = []
    for key, v in sorted(cfg.items()):
        k = knobs.get(key, {})
        base = res.values.get(key, k.get("value"))
        if k.get("how") == "scale":
            v = (base << v if v >= 0 else base >> -v) if isinstance(base, int) else f"x{2.0 ** v:g}"
        elif k.get("how") == "split":
            v = split(base, v) if isinstance(base, int) else f"/{2 ** -v} (a divisor)"
        parts.append(f"{key.split('.', 1)[-1]}={v}")
    return ", ".join(parts) or "as launched"
