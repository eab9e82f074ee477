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

import contextlib
import os
import random
import statistics
import sys
import threading
import time
from typing import Any

import torch

from tritondx.tools.task.module import as_tuple, load_module, norm_shape, to_dtype, tolerance_entries
from tritondx.tools.tune import knob as knobmod
from tritondx.tools.tune.precompile import PRECOMPILE_THREADS, Precompiler, install_compile_only
from tritondx.tools.tune.record import recording
from tritondx.tools.tune.search import EXTEND, WALL_CAP, Searcher, Trial, domains, top

#: a kernel's knobs are searched when it carries this share of the recorded device time (or of the calls, on CPU)
HOT_SHARE = 0.10
#: the device time one configuration's timed calls aim at
TIME_TARGET_MS = 10.0
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
#: fastest configurations timed again, interleaved with the initial kernel
FINAL_TOP = 5
#: a configuration must lead the launched one by this much in the search for the final timing to run (``contenders``)
FINAL_MIN_LEAD = 0.01
#: the task's check shapes each of the fastest configurations must also match the launched kernel on, and how many
#: configurations are checked at most (``check_shapes``)
CHECK_SHAPES_AT_MOST, CHECKED_AT_MOST = 3, 12
#: input draws per check shape: a configuration that leaves part of the data unread can match on one draw by luck
#: (H100 corpus batch_m of 2026-12-06: absmax_norm's partial-max kernel tuned to half its blocks matched at the check
#: shape where the largest value fell in the half it read; the verifier's other seeds rejected it)
CHECK_DRAWS = 2


def _outputs(x: Any) -> list[torch.Tensor]:
    return [t for t in as_tuple(x) if isinstance(t, torch.Tensor)]


def _mismatch(outs: list[torch.Tensor], refs: list[torch.Tensor], tols: dict[int, tuple[float, float]]) -> str:
    from tritondx.tools.verify.judge.compare import compare
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, the initial kernel returns {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs)):
        atol, rtol = tols.get(i, tols.get(-1, (1e-5, 1e-5)))
        bad = compare(o, r, atol, rtol)
        if bad:
            return f"output {i}: {bad['reason']}"
    return ""


class _Env:
    """What every configuration is run and checked against."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.cuda = job.get("device", "cpu").startswith("cuda")
        self.device = job.get("device", "cpu")
        self.orig = load_module(job["task"], "orig")
        self.inst_path = job["instrumented"]
        shapes = self.orig.BENCH_SHAPES if self.cuda else self.orig.CHECK_SHAPES
        self.shape = norm_shape(shapes[0])
        self.dtype = to_dtype(self.orig.DTYPES[0])
        self.inputs = as_tuple(self.orig.make_inputs(self.shape, self.dtype, 1, self.device))
        self.tols = tolerance_entries(self.orig, self.dtype)
        if self.cuda:
            from tritondx.tools.bench.bench import Timer
            self.timer = Timer(self.device, pad_host=True)
        self.mods: dict[tuple, Any] = {}

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def poison(self, refs: list[torch.Tensor]) -> None:
        """Fill the allocator's free blocks of the outputs' sizes, so an output a configuration does not write
        holds no earlier answer."""
        for r in refs:
            junk = torch.full((max(r.numel() * r.element_size(), 1),), 0x7F, dtype=torch.uint8, device=r.device)
            del junk

    def module(self, cfg: dict[str, tuple[str, int]]):
        key = tuple(sorted(cfg.items()))
        if key not in self.mods:
            knobmod.CURRENT = dict(cfg)
            self.mods[key] = load_module(self.inst_path, "tune")
        return self.mods[key]

    def call(self, mod, cfg: dict[str, tuple[str, int]]):
        knobmod.CURRENT = dict(cfg)
        return mod.launch(*self.inputs)

    def time_held(self, fn, est_ms: float | None = None, most: int = 100) -> float:
        """The median device time of ``fn``'s calls (at most ``most``), inside an exclusive hold the caller already
        has."""
        if est_ms is None:
            est_ms = statistics.median(self.timer.calls(fn, 3))
        n = max(5, min(most, int(TIME_TARGET_MS / max(est_ms, 1e-3))))
        return statistics.median(self.timer.calls(fn, n))


def _as_knobs(cfg: dict[str, int], how: dict[str, str], pins: dict[str, int] | None = None
              ) -> dict[str, tuple[str, int]]:
    """``knob.CURRENT`` for ``cfg``: an autotuned hot kernel's values not in it at the autotuner's pick (``pins``)."""
    out = {k: ("set", v) for k, v in (pins or {}).items()}
    out.update({k: (how[k], int(v)) for k, v in cfg.items()})
    return out


#: configurations screened in one shared hold and timed in one exclusive hold (``Waves``)
WAVE = 8
#: after the descent, the search buys combinations within this many values of its best (``Searcher.explore``)
EXPLORE_STEPS = 1
#: a configuration's screen (its compile where none was done ahead, a call, the comparison) and its timing may take
#: this long (s); past it the job ends itself and ``run.tune_task`` runs it again without that configuration. On the
#: H200 corpus batch of 2026-12-05 one attention kernel's 512-row tile hung its job until the job's timeout
#: (195 s): the task's whole search bought 4 configurations in 240 s.
CONFIG_LIMIT_S = 45.0
HUNG_EXIT = 75


def own_seconds() -> float:
    """A clock of the job's own work: wall time less the seconds it waited for the device lock."""
    return time.monotonic() - _usage()["wait_s"]


@contextlib.contextmanager
def _watch(what: str, limit_s: float):
    """End the process (exit ``HUNG_EXIT``) when the block runs longer than ``limit_s``: a kernel that hangs or
    runs for minutes holds the device and the task; the progress file names the configuration that was running."""
    def fire() -> None:
        sys.stderr.write(f"tune: {what} ran over {limit_s:.0f} s (a hang or a runaway kernel): the job ends and is "
                         "run again without it\n")
        sys.stderr.flush()
        os._exit(HUNG_EXIT)
    t = threading.Timer(limit_s, fire)
    t.daemon = True
    t.start()
    try:
        yield
    finally:
        t.cancel()


def _label(cfg: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items())) or "as launched"


def _usage() -> dict[str, float]:
    from tritondx.tools.exec.gpulock import usage
    return usage()


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

    def __init__(self, screen, env: "_Env", pre: "Precompiler | None", log, size: int,
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
                with _watch(f"configuration {_label(c)}", self.limit_s):
                    ok = self.screen(c)
                self.results[tuple(sorted(c.items()))] = None
                if ok is not None:
                    passed.append((c, ok))
            for c, (mod, kc) in passed:
                if self.log:
                    self.log("start", {"config": c})
                with _watch(f"timing {_label(c)}", self.limit_s):
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
    env = _Env(job)
    marks = {"loaded": round(time.monotonic() - t_start, 2)}   # seconds from the job's start to each stage's end
    how = {k["key"]: k["how"] for k in job["knobs"]}
    threads = int(job.get("precompile_threads", PRECOMPILE_THREADS))
    pre = (Precompiler(env.inst_path, env.inputs, threads) if env.cuda and threads > 0 and install_compile_only()
           else None)
    # 1. the launches, found by running them; the initial kernel's outputs are the screen's reference. An autotuner
    # compiles its configs in threads and times them alone
    with autotune_exclusive(env.cuda), phase("shared"):
        with recording(cuda=env.cuda) as rec:
            refs = [t.detach().clone() for t in _outputs(env.orig.launch(*env.inputs))]
            env.sync()
        if env.cuda:   # a second recorded call: the first one compiled (its device time includes nothing of that,
            with recording(cuda=True) as rec:   # but autotuners time their configs in it)
                _outputs(env.orig.launch(*env.inputs))
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
        pre.knobs_of = lambda cfg: _as_knobs(cfg, how, pins)

    def screen(cfg: dict[str, int]):
        """Load, run and compare one configuration (inside a shared hold): its module and knobs, or None."""
        kc = _as_knobs(cfg, how, pins)
        label = _label(cfg)
        try:
            mod = env.module(kc)
            env.poison(refs)
            outs = _outputs(env.call(mod, kc))
            env.sync()
            bad = _mismatch(outs, refs, env.tols)
        except Exception as exc:  # a configuration that does not compile or faults is screened out
            errors[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240] if str(exc) else ''}"
            env.mods.pop(tuple(sorted(kc.items())), None)
            env.sync()   # a CUDA fault poisons the context: this raises, the job ends, the parent classifies it
            return None
        if bad:
            errors[label] = "mismatch: " + bad[:300]
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
                            why_failed=lambda cfg: errors.get(_label(cfg)))
        waited = _usage()["wait_s"]
        trials = searcher.search()
        trials += waves.unasked({tuple(sorted(t.config.items())) for t in trials})
        search_info = {"stopped": searcher.stopped or "no move left",
                       "waited_s": round(_usage()["wait_s"] - waited, 2),
                       "wall_s": round(searcher.wall() - searcher.wall0, 2), "wall_cap_s": searcher.wall_cap_s}
    else:
        trials = _screen_only(doms, screened, budget, known, log)
        search_info = {}
    for t in trials:
        if t.status == "failed":
            t.note = errors.get(_label(t.config), "")
    marks["searched"] = round(time.monotonic() - t_start, 2)
    final: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    baselines = autotuner_configs(env.orig, {k.split(".", 1)[0] for k in pins}, how) if env.cuda else []
    if pre is not None and baselines and contenders(trials):   # compiled while the check shapes run, not in a hold
        pre.submit(baselines)
    if env.cuda and contenders(trials):
        checks = check_shapes(env, trials, how, pins, FINAL_TOP, log)
    marks["checked"] = round(time.monotonic() - t_start, 2)
    if env.cuda and contenders(trials):
        for cfg in baselines if pre is not None else []:
            pre.wait(cfg)
        final = _final(env, [t for t in top(trials, FINAL_TOP)], how, refs, pins, baselines)
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
            "device_usage": _usage(), "marks": marks}


def check_shapes(env: "_Env", trials: list[Trial], how: dict[str, str], pins: dict[str, int], n: int,
                 log=None) -> dict[str, Any]:
    """The ``n`` fastest configurations that also match the launched kernel on the task's check shapes (its
    ``CHECK_SHAPES``, the ones the verifier checks first), the others marked failed with the shape that showed it.
    The search screens every configuration at the benchmark size only; a tile wider than a small shape's row can
    be right there and wrong on the small one (H100 corpus batch of 2026-12-05, batch_j: optimize_softmax_online's
    two winners, TILE_N 4096 -> 16384 at 1.23x, both gave NaN at the check shape and the verifier rejected them; the
    task ended at 1.00x where batch_g had kept a smaller tile at 1.12x). Checked after the search, on at most
    ``CHECKED_AT_MOST`` configurations, so the search itself stays cheap."""
    from tritondx.tools.exec.gpulock import autotune_exclusive, phase
    shapes = [norm_shape(x) for x in getattr(env.orig, "CHECK_SHAPES", [])]
    shapes = [x for x in shapes if x != env.shape][:CHECK_SHAPES_AT_MOST]
    info: dict[str, Any] = {"shapes": [list(x) if isinstance(x, tuple) else x for x in shapes], "checked": 0,
                            "failed": {}}
    if not shapes:
        return info
    # an autotuned launcher meets new shapes here: it times its configs with the device to itself, as in the recording
    with autotune_exclusive(env.cuda), phase("shared"):
        cases = []
        for i, shape, draw in ((i, x, d) for i, x in enumerate(shapes) for d in range(CHECK_DRAWS)):
            try:
                inputs = as_tuple(env.orig.make_inputs(shape, env.dtype, 7 + i + 1000 * draw, env.device))
                refs = [t.detach().clone() for t in _outputs(env.orig.launch(*[_copy(x) for x in inputs]))]
                env.sync()
            except Exception:   # a check shape the launched kernel itself cannot run says nothing of a configuration
                continue
            cases.append((shape, inputs, refs))
        if not cases:
            return info
        passed = 0
        for t in top(trials, len(trials)):   # the fastest first
            if passed >= n or info["checked"] >= CHECKED_AT_MOST:
                break
            if not t.config:   # the configuration launched: the reference itself
                passed += 1
                continue
            info["checked"] += 1
            kc = _as_knobs(t.config, how, pins)
            if log:
                log("start", {"config": t.config})
            bad = ""
            for shape, inputs, refs in cases:
                try:
                    with _watch(f"configuration {_label(t.config)} at check shape {shape}", CONFIG_LIMIT_S):
                        mod = env.module(kc)
                        knobmod.CURRENT = dict(kc)
                        env.poison(refs)
                        outs = _outputs(mod.launch(*[_copy(x) for x in inputs]))
                        env.sync()
                    bad = _mismatch(outs, refs, env.tols)
                except Exception as exc:   # a fault poisons the context: sync raises, the job ends (run.tune_task)
                    env.sync()
                    bad = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                if bad:
                    bad = f"check shape {shape}: {bad}"[:300]
                    break
            if bad:
                info["failed"][_label(t.config)] = bad
                t.status, t.ms, t.note = "failed", None, bad
            else:
                passed += 1
    return info


def _copy(x: Any) -> Any:
    """A fresh copy of a tensor input (a launcher that writes an input in place leaves the next call its answer)."""
    return x.clone() if isinstance(x, torch.Tensor) else x


def contenders(trials: list[Trial]) -> bool:
    """Whether a configuration other than the one launched ran faster in the search by ``FINAL_MIN_LEAD``: else the
    final timing, which holds a winner to a 3% gain (``run.MIN_GAIN``), has nothing to decide (it took 10-22 s of
    the tune jobs of unchanged tasks in the H100 corpus batch of 2026-12-05, batch_f: unsloth_rms_layernorm,
    quantize_kv_copy, 2by4_masked_add)."""
    launched = [t.ms for t in trials if not t.config and t.ms is not None]
    others = [t.ms for t in trials if t.config and t.ms is not None]
    if not others:
        return False
    return not launched or min(others) < min(launched) * (1 - FINAL_MIN_LEAD)


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
    written as ``tl.range`` with stages), for correctness."""
    t0 = time.monotonic()
    out: list[Trial] = list(known or [])
    done = {tuple(sorted(t.config.items())) for t in out}
    cfgs: list[dict[str, int]] = [{}]
    for d in doms:
        if d.kind in ("tile", "count", "grid", "loop"):
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


#: the most of an autotuner's own configurations timed beside the winners (``autotuner_configs``)
AUTOTUNER_BASELINES = 8


def autotuner_configs(mod: Any, kernels: set[str], how: dict[str, str]) -> list[dict[str, int]]:
    """The autotuner's own configurations of ``kernels`` (an autotuned task's hot kernels) as knob values. Its pick
    differs between processes on a loaded host, and a winner timed against the tune job's pick lost its gain against
    the bench's (H100 corpus batch_p of 2026-12-06: vmamba_swiglu_fwd 1.91x predicted, the tune job's autotuner on
    ``BLOCK_N 128``, 44 us; 1.02x measured, the bench's at 23.5 us). ``_final`` times them beside the winners, and a
    winner is held to the fastest (``run.tune_task``)."""
    out: list[dict[str, int]] = []
    for kern in sorted(kernels):
        obj = getattr(mod, kern, None)
        while obj is not None and not hasattr(obj, "configs") and hasattr(obj, "fn"):
            obj = obj.fn    # @triton.heuristics over @triton.autotune
        for c in getattr(obj, "configs", None) or []:
            vals = {**getattr(c, "kwargs", {}), "num_warps": getattr(c, "num_warps", None),
                    "num_stages": getattr(c, "num_stages", None)}
            cfg = {f"{kern}.{p}": int(v) for p, v in vals.items()
                   if f"{kern}.{p}" in how and isinstance(v, int) and not isinstance(v, bool)}
            if cfg and cfg not in out:
                out.append(cfg)
    return out[:AUTOTUNER_BASELINES]


def _final(env: _Env, best: list[Trial], how: dict[str, str], refs: list[torch.Tensor], pins: dict[str, int],
           baselines: list[dict[str, int]] | None = None) -> dict[str, Any]:
    """The initial kernel and the fastest configurations, timed again interleaved (3 shuffled rounds); the last
    timed call's outputs of each compared with the initial kernel's. ``baselines``: an autotuner's own
    configurations (``autotuner_configs``), timed beside them and marked ``baseline``: the author's options, what a
    winner must beat, never a winner."""
    from tritondx.tools.exec.gpulock import phase
    fns: dict[str, Any] = {"initial": lambda: env.orig.launch(*env.inputs)}
    labels: dict[str, dict[str, int]] = {}
    for i, t in enumerate(best):
        kc = _as_knobs(t.config, how, pins)
        mod = env.module(kc)
        fns[f"c{i}"] = (lambda m=mod, c=kc: env.call(m, c))
        labels[f"c{i}"] = t.config
    with phase("shared") if baselines else contextlib.nullcontext():
        for i, cfg in enumerate(baselines or []):
            kc = _as_knobs(cfg, how, pins)
            try:
                mod = env.module(kc)
                env.call(mod, kc)     # one that cannot run at this shape is no baseline
                env.sync()
            except Exception:  # noqa: BLE001
                env.mods.pop(tuple(sorted(kc.items())), None)
                env.sync()
                continue
            fns[f"a{i}"] = (lambda m=mod, c=kc: env.call(m, c))
            labels[f"a{i}"] = cfg
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    rng = random.Random(0)
    ests = {k: None for k in fns}
    # every round under one exclusive hold and every check under one shared hold: with a hold per timing (18 for
    # five configurations) each queued behind the other tasks' jobs, this step took 20-54 s of a tune job on the
    # H200 corpus batch of 2026-12-05 (batch_b, tune.json marks) for well under a second of device time
    with phase("exclusive"):
        for _ in range(3):
            order = list(fns)
            rng.shuffle(order)
            for k in order:
                ms = env.time_held(fns[k], ests[k])
                ests[k] = ests[k] or ms
                rounds[k].append(ms)
    checked: dict[str, str] = {}
    with phase("shared"):
        for k, fn in fns.items():
            env.poison(refs)
            outs = _outputs(fn())
            env.sync()
            checked[k] = _mismatch(outs, refs, env.tols)
    out = {}
    for k, meds in rounds.items():
        med = statistics.median(meds)
        out[k] = {"config": labels.get(k, {}), "median_ms": med, "rounds_ms": meds,
                  "spread": (max(meds) - min(meds)) / med if med > 0 else 0.0, "timed_output": checked[k] or "equal"}
        if k.startswith("a"):
            out[k]["baseline"] = True
    return out
