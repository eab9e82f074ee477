"""The tune job after its search (inside the sandboxed worker): the fastest configurations checked at the task's
check shapes, an autotuner's own configurations read as baselines, and the final interleaved timing."""

from __future__ import annotations

import contextlib
import random
import statistics
from typing import Any

import torch

from tritondx.tools.task.module import as_tuple, norm_shape
from tritondx.tools.tune import knob as knobmod
from tritondx.tools.tune.env import (CONFIG_LIMIT_S, WROTE_OUTSIDE, Env, Kept, as_knobs, fresh, label, mismatch,
                                    outputs, run_checked, watch)
from tritondx.tools.tune.search import Trial, top

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


#: knob kinds that never change what a kernel computes, only how (``space.Knob.kind``): warps, pipelining stages and
#: eviction hints
NEUTRAL_KINDS = ("warps", "stages", "loop", "evict")


def check_shapes(env: Env, trials: list[Trial], how: dict[str, str], pins: dict[str, int], n: int,
                 log=None, neutral: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The ``n`` fastest configurations that also match the launched kernel on the task's check shapes (its
    ``CHECK_SHAPES``, the ones the verifier checks first), the others marked failed with the shape that showed it.
    The search screens every configuration at the benchmark size only; a tile wider than a small shape's row can
    be right there and wrong on the small one (H100 corpus batch of 2026-12-05, batch_j: optimize_softmax_online's
    two winners, TILE_N 4096 -> 16384 at 1.23x, both gave NaN at the check shape and the verifier rejected them; the
    task ended at 1.00x where batch_g had kept a smaller tile at 1.12x). Checked after the search, on at most
    ``CHECKED_AT_MOST`` configurations, so the search itself stays cheap.

    Checked fastest first, except that a configuration whose values on the knobs that can change a result (all but
    the ``neutral`` ones: warps, stages, eviction hints) are a failed one's waits until the others are checked: the
    same tile fails again (H100 corpus batch_y_rest of 2026-12-07: optimize_softmax_online's 12 checks all went to
    ``TILE_N 4096 -> 8192`` with other warps and hints, all NaN at the check shape). ``info["passed"]`` names the
    configurations that passed; only they (and the launched one) are timed again and can win (``passed_only``): the
    two unchecked ones the budget left over had become that batch's winners, and the verifier rejected both."""
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
                refs = [t.detach().clone() for t in outputs(env.orig.launch(*[fresh(x) for x in inputs]))]
                env.sync()
            except Exception:   # a check shape the launched kernel itself cannot run says nothing of a configuration
                continue
            cases.append((shape, inputs, refs, Kept([x for x in inputs if isinstance(x, torch.Tensor)] + refs)))
        if not cases:
            return info
        passed = 0
        info["passed"] = []
        pending = top(trials, len(trials))   # the fastest first

        def result_values(t: Trial) -> tuple:
            return tuple(sorted((k, v) for k, v in t.config.items() if k not in neutral))

        failed_values: set[tuple] = set()
        while pending:
            if passed >= n or info["checked"] >= CHECKED_AT_MOST:
                break
            t = next((x for x in pending if result_values(x) not in failed_values), pending[0])
            pending.remove(t)
            if not t.config:   # the configuration launched: the reference itself
                passed += 1
                continue
            info["checked"] += 1
            kc = as_knobs(t.config, how, pins)
            if log:
                log("start", {"config": t.config})
            bad = ""
            for shape, inputs, refs, kept in cases:
                try:
                    with watch(f"configuration {label(t.config)} at check shape {shape}", CONFIG_LIMIT_S):
                        mod = env.module(kc)
                        knobmod.CURRENT = dict(kc)
                        env.poison(refs)
                        outs = outputs(mod.launch(*[fresh(x) for x in inputs]))
                        env.sync()
                    bad = mismatch(outs, refs, env.tols)
                    if kept.put_back():   # the call's inputs are copies: a change to these is a write outside
                        bad = WROTE_OUTSIDE + (f"; {bad}" if bad else "")
                except Exception as exc:   # a fault poisons the context: sync raises, the job ends (run.tune_task)
                    env.sync()
                    bad = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                if bad:
                    bad = f"check shape {shape}: {bad}"[:300]
                    break
            if bad:
                info["failed"][label(t.config)] = bad
                t.status, t.ms, t.note = "failed", None, bad
                failed_values.add(result_values(t))
            else:
                passed += 1
                info["passed"].append(label(t.config))
    return info


def passed_only(trials: list[Trial], checks: dict[str, Any]) -> list[Trial]:
    """The fastest configurations that may be timed again and win: where ``check_shapes`` checked, the launched one and
    those that passed its check, not those its budget left unchecked; else all of them."""
    ranked = top(trials, len(trials))
    if "passed" not in checks:
        return ranked
    ok = set(checks["passed"])
    return [t for t in ranked if not t.config or label(t.config) in ok]


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


#: the most of an autotuner's own configurations timed beside the winners (``autotuner_configs``)
AUTOTUNER_BASELINES = 8


def autotuner_configs(mod: Any, kernels: set[str], how: dict[str, str]) -> list[dict[str, int]]:
    """The autotuner's own configurations of ``kernels`` (an autotuned task's hot kernels) as knob values. Its pick
    differs between processes on a loaded host, and a winner timed against the tune job's pick lost its gain against
    the bench's (H100 corpus batch_p of 2026-12-06: vmamba_swiglu_fwd 1.91x predicted, the tune job's autotuner on
    ``BLOCK_N 128``, 44 us; 1.02x measured, the bench's at 23.5 us). ``final_timing`` times them beside the
    winners, and a winner is held to the fastest (``run.tune_task``)."""
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


def final_timing(env: Env, best: list[Trial], how: dict[str, str], refs: list[torch.Tensor], pins: dict[str, int],
           baselines: list[dict[str, int]] | None = None) -> dict[str, Any]:
    """The initial kernel and the fastest configurations, timed again interleaved (3 shuffled rounds); the last
    timed call's outputs of each compared with the initial kernel's. ``baselines``: an autotuner's own
    configurations (``autotuner_configs``), timed beside them and marked ``baseline``: the author's options, what a
    winner must beat, never a winner."""
    from tritondx.tools.exec.gpulock import phase
    fns: dict[str, Any] = {"initial": lambda: env.orig.launch(*env.inputs)}
    labels: dict[str, dict[str, int]] = {}
    for i, t in enumerate(best):
        kc = as_knobs(t.config, how, pins)
        mod = env.module(kc)
        fns[f"c{i}"] = (lambda m=mod, c=kc: env.call(m, c))
        labels[f"c{i}"] = t.config
    with phase("shared") if baselines else contextlib.nullcontext():
        for i, cfg in enumerate(baselines or []):
            kc = as_knobs(cfg, how, pins)
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
            checked[k] = run_checked(env, fn, refs)
    out = {}
    for k, meds in rounds.items():
        med = statistics.median(meds)
        out[k] = {"config": labels.get(k, {}), "median_ms": med, "rounds_ms": meds,
                  "spread": (max(meds) - min(meds)) / med if med > 0 else 0.0, "timed_output": checked[k] or "equal"}
        if k.startswith("a"):
            out[k]["baseline"] = True
    return out
