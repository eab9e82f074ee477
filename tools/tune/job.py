"""Job ``tune`` (inside the sandboxed worker): record the launches, then screen and time many configurations.

1. The task's ``launch()`` runs once on the benchmark inputs (GPU; the first check shape under the interpreter)
   with every launch recorded (``record.py``): which kernels ran, their values, their share of the device time.
2. The knobs of the kernels that carry the time (``hot_share`` of the device time or more) are searched
   (``search.py``). Each configuration is the instrumented task loaded afresh with the knobs set
   (``knob.CURRENT``): its first call compiles, its outputs are compared with the initial kernel's on the same
   inputs (a mismatch fails it), then it is timed like the bench times: L2 flushed before every call, device events,
   the median of ``calls`` calls, with the device held exclusively while it is timed.
3. The fastest few and the initial kernel (for an autotuned kernel, also the autotuner's own configurations: the
   bar a winner must clear) are timed again, interleaved over three rounds in a shuffled order, and their outputs
   of the last timed call compared again.

Without a GPU nothing is timed: the as-launched configuration and each tile knob one step either way are run for
correctness only, and the result says speed was not measured. The screen only chooses what the verifier's full
checks and bench see; it decides nothing.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from tritondx.tools.tune.env import (CONFIG_LIMIT_S, WROTE_OUTSIDE, Env, as_knobs, label, outputs, own_seconds,
                                    run_checked, usage, watch)
from tritondx.tools.tune.final import (FINAL_TOP, NEUTRAL_KINDS, autotuner_configs, check_shapes, contenders,
                                      final_timing, passed_only)
from tritondx.tools.tune.precompile import PRECOMPILE_THREADS, Precompiler, install_compile_only
from tritondx.tools.tune.record import recording
from tritondx.tools.tune.search import EXTEND, WALL_CAP, Searcher, Trial, domains

#: a kernel's knobs are searched when it carries this share of the recorded device time (or of the calls, on CPU)
HOT_SHARE = 0.10
#: the most calls a configuration is timed with in the search's waves (the final interleaved timing takes up to 100):
#: at 100 a 20-us kernel's wave held the device exclusively ~0.3 s a configuration (the flush and the host pad per
#: call), and the tune jobs' exclusive holds were 215 s of the 314 s the H100 corpus batch of 2026-12-06 held the
#: device exclusively, its 8 tasks' jobs waiting 20-50 s each for the lock; the search's steps need 2%
#: (``MIN_STEP_GAIN``)
SEARCH_CALLS = 30
#: configurations a search may run at most; its budget of seconds is what ends it. At 120, with the waves' timings
#: made cheaper (``SEARCH_CALLS``), 7 of the H100 corpus batch_p's searches (2026-12-06) stopped at the cap with
#: budget left; triton_matmul_fp16 stopped at ``num_stages 3->4`` (1.37x) where batch_m's had reached ``3->5`` (1.48x)
MAX_TRIALS = 200
#: configurations screened in one shared hold and timed in one exclusive hold (``Waves``)
WAVE = 8
#: after the descent, the search buys combinations within this many values of its best (``Searcher.explore``)
EXPLORE_STEPS = 1


class Waves:
    """The search's configurations evaluated in waves: the one it asks for and those it handed to ``prefetch``
    (its likely next ones), up to ``size``, compiled ahead in threads, screened and the correct ones timed one after
    another in **one** exclusive hold. The search's order is
    unchanged; a configuration it asks for later is answered from the wave. On the H200 corpus batch of
    2026-12-05 (8 tasks at a time) a job timed 4-21 configurations in its 25 s with a hold of each kind per
    configuration, though its compiles were done ahead and it held the device 2-7 s: the rest was waiting for the
    locks behind the other tasks' jobs. Configurations measured but never asked for are trials too
    (``unasked``).

    A wave's members are chosen once its shared hold is granted: the prefetched configurations whose compile ahead
    is done by then (one still compiling would hold the asked one behind it: it waits for a later wave), so the
    compiles go on while the job waits for the lock. A wave is whole: the configurations in it are screened and
    timed even when the search's budget ends meanwhile (a few milliseconds each inside holds taken anyway for the
    asked one). On the H100 corpus batch of 2026-12-05, with members chosen before the wait, the first wave of 6 of
    26 jobs held only the as-launched configuration, and flaggems_argmax's second cut 7 ready configurations at the
    budget's end after a 40 s wait: the job timed 2 configurations (on the H200 the day before: 17
    configurations, 23.5x)."""

    def __init__(self, screen, env: Env, pre: "Precompiler | None", log, size: int,
                 limit_s: float = CONFIG_LIMIT_S) -> None:
        self.screen, self.env, self.pre, self.log, self.size = screen, env, pre, log, max(1, size)
        self.limit_s = limit_s
        self.results: dict[tuple, float | None] = {}
        self.pending: list[dict[str, int]] = []
        self.stats = {"waves": 0, "configurations": 0, "asked": 0}

    def prefetch(self, cfgs: list[dict[str, int]]) -> None:
        have = {tuple(sorted(c.items())) for c in self.pending} | set(self.results)
        for c in cfgs:
            k = tuple(sorted(c.items()))
            if k not in have:
                self.pending.append(dict(c))
                have.add(k)
        if self.pre is not None:
            self.pre.submit(cfgs)

    def evaluate(self, cfg: dict[str, int]) -> float | None:
        key = tuple(sorted(cfg.items()))
        self.stats["asked"] += 1
        if key not in self.results:
            if self.pre is not None:
                self.pre.wait(cfg)
            self._run(cfg)
        return self.results[key]

    def _members(self, cfg: dict[str, int]) -> list[dict[str, int]]:
        """``cfg`` and the prefetched configurations ready now, up to ``size``; taken out of ``pending``."""
        key = tuple(sorted(cfg.items()))
        ready = [c for c in self.pending if tuple(sorted(c.items())) != key and (self.pre is None or self.pre.ready(c))]
        wave = [cfg] + ready[: self.size - 1]
        taken = {tuple(sorted(c.items())) for c in wave}
        self.pending = [c for c in self.pending if tuple(sorted(c.items())) not in taken]
        return wave

    def _run(self, cfg: dict[str, int]) -> None:
        from tritondx.tools.exec.gpulock import phase
        passed = []
        # one exclusive hold for the wave's screens and timings: a shared hold for the screens and an exclusive one
        # for the timings waited twice behind the batch's other holds, and the waits were most of the search
        # (H100 corpus batch of 2026-12-05 with the lock monitor: flaggems_max's search waited 65 s of 73 s)
        with phase("exclusive"):
            wave = self._members(cfg)
            for c in wave:
                if self.log and c is not wave[0]:
                    self.log("start", {"config": c})
                with watch(f"configuration {label(c)}", self.limit_s):
                    ok = self.screen(c)
                self.results[tuple(sorted(c.items()))] = None
                if ok is not None:
                    passed.append((c, ok))
            for c, (mod, kc) in passed:
                if self.log:
                    self.log("start", {"config": c})
                with watch(f"timing {label(c)}", self.limit_s):
                    self.results[tuple(sorted(c.items()))] = self.env.time_held(
                        lambda m=mod, k=kc: self.env.call(m, k), most=SEARCH_CALLS)
        if self.log:   # the wave's first configuration is the search's: it logs that one's trial itself
            self.log("start", {"config": wave[0]})
        self.stats["waves"] += 1
        self.stats["configurations"] += sum(1 for c in wave if tuple(sorted(c.items())) in self.results)

    def unasked(self, asked: set[tuple]) -> list[Trial]:
        """Trials for the configurations a wave measured that the search never asked for."""
        return [Trial(config=dict(k), status="ok" if ms is not None else "failed", ms=ms, phase="wave")
                for k, ms in self.results.items() if k not in asked]


def tune(job: dict[str, Any]) -> dict[str, Any]:
    from tritondx.tools.exec.gpulock import autotune_exclusive, phase
    t_start = time.monotonic()
    env = Env(job)
    marks = {"loaded": round(time.monotonic() - t_start, 2)}   # seconds from the job's start to each stage's end
    how = {k["key"]: k["how"] for k in job["knobs"]}
    threads = int(job.get("precompile_threads", PRECOMPILE_THREADS))
    pre = (Precompiler(env.inst_path, env.inputs, threads) if env.cuda and threads > 0 and install_compile_only()
           else None)
    # 1. the launches, found by running them; the initial kernel's outputs are the screen's reference. An autotuner
    # compiles its configs in threads and times them alone
    with autotune_exclusive(env.cuda), phase("shared"):
        with recording() as rec:   # (untimed: it compiles, and autotuners time their configs in it)
            refs = [t.detach().clone() for t in outputs(env.orig.launch(*env.inputs))]
            env.sync()
            env.keep(refs)
        if env.cuda:   # a second recorded call, timed: each launch's device time
            with recording(cuda=True) as rec:
                outputs(env.orig.launch(*env.inputs))
                env.sync()
    launches = rec.launches
    marks["recorded"] = round(time.monotonic() - t_start, 2)
    hot = {r.kernel for r in launches if r.share >= HOT_SHARE}
    knobs = [k for k in job["knobs"] if any(p.split(".", 1)[0] in hot for p in k["params"])]
    launched: dict[str, int | None] = {}
    for k in knobs:
        vals = set()
        for p in k["params"]:
            kern, name = p.split(".", 1)
            for r in launches:
                if r.kernel == kern:
                    v = r.constexprs.get(name, r.options.get(name))
                    if isinstance(v, int) and (not isinstance(v, bool) or k.get("autotune")):
                        vals.add(v)
        launched[k["key"]] = vals.pop() if len(vals) == 1 else None
    # an autotuned hot kernel runs its recorded pick unless a configuration changes a value; one whose pick is not
    # known (several picks recorded) is not searched
    pins: dict[str, int] = {}
    auto_kernels = {p.split(".", 1)[0] for k in knobs if k.get("autotune") for p in k["params"]}
    for kern in auto_kernels:
        mine = [k for k in knobs if k.get("autotune") and k["params"][0].split(".", 1)[0] == kern]
        if all(isinstance(launched.get(k["key"]), int) for k in mine):
            pins.update({k["key"]: launched[k["key"]] for k in mine})
        else:
            knobs = [k for k in knobs if k not in mine]
    sms = torch.cuda.get_device_properties(0).multi_processor_count if env.cuda else 132
    fill = {}
    for r in launches:
        fill[r.kernel] = min(fill.get(r.kernel, float("inf")), r.programs / sms)
    doms = domains(knobs, launched, fill)
    errors: dict[str, str] = {}

    if pre is not None:
        pre.knobs_of = lambda cfg: as_knobs(cfg, how, pins)

    def screen(cfg: dict[str, int]):
        """Load, run and compare one configuration (inside a shared hold): its module and knobs, or None."""
        kc = as_knobs(cfg, how, pins)
        lab = label(cfg)
        try:
            mod = env.module(kc)
            bad = run_checked(env, lambda: env.call(mod, kc), refs)
        except Exception as exc:  # a configuration that does not compile or faults is screened out
            errors[lab] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240] if str(exc) else ''}"
            env.mods.pop(tuple(sorted(kc.items())), None)
            env.sync()   # a CUDA fault poisons the context: this raises, the job ends, the parent classifies it
            return None
        if bad:
            errors[lab] = ("" if bad.startswith(WROTE_OUTSIDE) else "mismatch: ") + bad[:300]
            return None
        return mod, kc

    def screened(cfg: dict[str, int]) -> float | None:
        """Without a timer: 1.0 where the configuration is correct (the search's order only), else None."""
        with phase("shared"):
            return None if screen(cfg) is None else 1.0

    log = _progress(job.get("progress_file"))
    waves = (Waves(screen, env, pre, log, int(job.get("wave", WAVE)), float(job.get("config_limit_s", CONFIG_LIMIT_S)))
             if env.cuda else None)

    budget = float(job.get("budget_s", 60.0))
    known = [Trial(**t) for t in job.get("known") or []]
    if env.cuda:
        searcher = Searcher(doms, waves.evaluate, budget, max_trials=int(job.get("max_trials", MAX_TRIALS)),
                            known=known, log=log, prefetch=waves.prefetch,
                            explore_steps=int(job.get("explore_steps", EXPLORE_STEPS)),
                            measured=lambda: waves.results, extend=float(job.get("extend", EXTEND)),
                            clock=own_seconds, wall_cap_s=float(job.get("wall_cap_s") or budget * WALL_CAP),
                            why_failed=lambda cfg: errors.get(label(cfg)))
        waited = usage()["wait_s"]
        trials = searcher.search()
        trials += waves.unasked({tuple(sorted(t.config.items())) for t in trials})
        search_info = {"stopped": searcher.stopped or "no move left",
                       "waited_s": round(usage()["wait_s"] - waited, 2),
                       "wall_s": round(searcher.wall() - searcher.wall0, 2), "wall_cap_s": searcher.wall_cap_s}
    else:
        trials = _screen_only(doms, screened, budget, known, log)
        search_info = {}
    for t in trials:
        if t.status == "failed":
            t.note = errors.get(label(t.config), "")
    marks["searched"] = round(time.monotonic() - t_start, 2)
    final: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    baselines = autotuner_configs(env.orig, {k.split(".", 1)[0] for k in pins}, how) if env.cuda else []
    if pre is not None and baselines and contenders(trials):   # compiled while the check shapes run, not in a hold
        pre.submit(baselines)
    if env.cuda and contenders(trials):
        checks = check_shapes(env, trials, how, pins, FINAL_TOP, log,
                              neutral=frozenset(d.key for d in doms if d.kind in NEUTRAL_KINDS))
    marks["checked"] = round(time.monotonic() - t_start, 2)
    if env.cuda and contenders(trials):
        for cfg in baselines if pre is not None else []:
            pre.wait(cfg)
        final = final_timing(env, passed_only(trials, checks)[:FINAL_TOP], how, refs, pins, baselines)
    precompiled = pre.close() if pre is not None else {}
    marks["final"] = round(time.monotonic() - t_start, 2)
    return {"ok": True, "launches": [r.model_dump() for r in launches], "hot": sorted(hot),
            "domains": [{"key": d.key, "kind": d.kind, "values": d.values, "start": d.start, "launched": d.launched}
                        for d in doms],
            "launched_values": launched, "trials": [t.model_dump() for t in trials], "final": final,
            "timed": env.cuda, "shape": env.shape if not isinstance(env.shape, tuple) else list(env.shape),
            "dtype": str(env.dtype), "wall_s": round(time.monotonic() - t_start, 2), "budget_s": budget,
            "precompiled": precompiled, "waves": waves.stats if waves is not None else {}, "search": search_info,
            "check_shapes": checks,
            "device_usage": usage(), "marks": marks}


def _progress(path: str | None):
    """Each configuration's start and trial as a JSON line in the job's progress file (written back even when the
    process dies: ``run.tune_task`` then runs the job again without the configuration that killed it)."""
    if not path:
        return None
    import json

    def log(kind: str, payload: dict) -> None:
        with open(path, "a") as f:
            f.write(json.dumps({"kind": kind, **payload}, default=str) + "\n")
    return log


def _screen_only(doms, evaluate, budget_s: float, known: list[Trial] | None = None, log=None) -> list[Trial]:
    """No timer: the as-launched configuration and each tile knob one step either way (a loop knob: its loop
    written as ``tl.range`` with stages; an evict knob: the loads hinted), for correctness."""
    t0 = time.monotonic()
    out: list[Trial] = list(known or [])
    done = {tuple(sorted(t.config.items())) for t in out}
    cfgs: list[dict[str, int]] = [{}]
    for d in doms:
        if d.kind in ("tile", "count", "grid", "loop", "evict"):
            i = d.values.index(d.start)
            cfgs += [{d.key: d.values[j]} for j in (i + 1, i - 1) if 0 <= j < len(d.values)]
    for cfg in cfgs:
        if tuple(sorted(cfg.items())) in done:
            continue
        if time.monotonic() - t0 > budget_s:
            out.append(Trial(config=cfg, status="over_budget", phase="screen"))
            continue
        if log:
            log("start", {"config": cfg})
        ok = evaluate(cfg)
        out.append(Trial(config=cfg, status="ok" if ok is not None else "failed", phase="screen"))
        if log:
            log("trial", out[-1].model_dump())
    return out


