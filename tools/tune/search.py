"""The order the tuner tries configurations in, under a budget (pure: the job passes ``evaluate``).

A configuration maps a knob's key to its exponent (scale knobs: the value where it is defined times 2**k) or its
value (set knobs); a key left out keeps the task's own value. ``evaluate(config)`` returns the measured time, or
``None`` when the configuration failed (compile error, wrong output, fault).

1. **Sweeps**: each knob alone, one step from the task's value the likelier way (a tile the grid follows is made
   smaller first where the grid leaves SMs idle), on in that direction while it improves, else the other way, ending after two steps that do not improve on that knob's best or at the first failure (larger tiles
   stop compiling, smaller ones can stop being correct) - what ``triton.autotune`` users write by hand, without
   its fixed list.
2. **Combination** of every knob's best.
3. **Line search** from the best so far (Inductor's coordinate descent, with runs): each knob moved one step in
   either direction, kept moving while it improves; rounds until nothing improves or the budget ends. Before each
   knob the descent moves to the best configuration measured so far, one a wave timed ahead of the descent
   included (``measured``). The budget stretches, up to ``EXTEND`` times, while the best keeps improving.
4. **Explore** (``explore_steps``): the budget left buys combinations of several knobs around the best, nearest
   first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

#: the largest tile a configuration may have per kernel, in elements (registers: 128 threads x 255 regs x ~4)
MAX_TILE_ELEMS = 1 << 17
#: the largest value a ``tl.dot`` operand's tile dimension may take (no MMA tile or Triton matmul config goes past
#: 256; an attention kernel's BLOCK_M 128 -> 512 beside fixed 128-wide K/V tiles compiled for over 45 s and the tune
#: job was killed as hung, H100 corpus batch_j of 2026-12-05, slora_context_attn_nopad)
MAX_DOT_TILE = 256
#: a ``tl.dot`` kernel's accumulator elements per thread (its block over 32 x num_warps threads) may not pass this
#: unless they did as launched: Triton's own matmul configs stop at 128 (128x128 at 4 warps, 128x256 at 8); past it
#: the accumulator spills. An attention kernel's 128x128 tiles at 2 warps timed 50-71 ms against 1.1 ms, and at one
#: warp its compile ran past the job's 45-s limit, killing the job (H100 corpus batch of 2026-12-06,
#: slora_context_attn_nopad: 155 s of a 245-s tune job)
MAX_ACC_PER_THREAD = 128
#: what Triton's compile error says when a configuration's buffers exceed the device's shared memory, e.g.
#: "OutOfResources: out of resource: shared memory, Required: 294912, Hardware limit: 232448. Reducing block ..."
SMEM_FAILURE = "out of resource: shared memory"
WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
#: an improvement smaller than this is noise for the search's own decisions (the verifier's bench decides later)
MIN_STEP_GAIN = 0.02
#: combinations handed to ``prefetch`` at a time by ``explore`` (the job times them as one wave)
EXPLORE_WAVE = 8
#: times the descent runs again from a better configuration its explore found (combinations are the explore's, single
#: steps the descent's: H100 corpus batch_q of 2026-12-06, slora_softmax_reducev's explore found ``BLOCK_N 2 steps,
#: num_warps 2`` at 0.0706 ms from the descent's ``BLOCK_N 1 step`` (0.092 ms) and the search ended with "no move
#: left" and budget to spare; the next steps from there (``BLOCK_N 3 steps, num_warps 4``) measured 0.0564 ms in
#: batch_p, 3.30x against 2.46x)
RECENTER = 2
#: past its budget the search goes on, up to this many budgets, while its best improved (by ``MIN_STEP_GAIN``) within
#: the last half budget: a search still finding speed is the one whose time pays (H100 corpus batch of 2026-12-05:
#: flaggems_argmax's first wave found BLOCK_M 128 -> 1, 83x, and its budget ended, behind the other tasks' locks,
#: before any knob moved from there)
EXTEND = 2.0
#: the search's budget counts the job's own seconds, not its waits for the device lock (the job's ``own_seconds``);
#: its wall time is capped at this many budgets where the job names no cap of its own (``wall_cap_s``). In batch_h_sub16 of
#: 2026-12-05 (H100, 16 tasks at a time) the tune jobs waited 12-46 s each for the device within 25 s budgets, and
#: flaggems_argmax's figure went 700x / 85x / 1.00x in three calls of near-identical code with the waits
WALL_CAP = 3.0


@dataclass
class Domain:
    """One knob's values: ``values`` in order (exponents or option values), ``start`` the task's own."""
    key: str
    kind: str                      # tile, count, warps, stages
    values: list[int]
    start: int
    kernel: str = ""
    launched: int | None = None    # a tile's value as launched (for the per-kernel tile bound)
    first: int = 1                 # the direction tried first (-1: smaller values first)
    absolute: bool = False         # values are the tile's values, not exponents (an autotuned kernel's config)
    #: a grid-tied tile of a kernel whose grid leaves SMs idle: the value whose grid fills them (prefetched first)
    fill_step: int | None = None
    dot: bool = False              # a tile that shapes a ``tl.dot`` operand


class Trial(BaseModel):
    config: dict[str, int]
    status: str                    # ok, failed, over_budget, too_large
    ms: float | None = None
    note: str = ""
    phase: str = ""


def domains(knobs: list[dict], launched: dict[str, int | None], fill: dict[str, float] | None = None
            ) -> list[Domain]:
    """Each knob's values (``knobs``: ``Knob`` dumps; ``launched``: key -> its value in the recorded launch;
    ``fill``: kernel -> its programs per SM as launched). A tile the grid follows is tried smaller first where its
    kernel's grid leaves SMs idle (fewer programs than SMs)."""
    out = []
    for k in knobs:
        kernel = k["params"][0].split(".", 1)[0]
        if k["kind"] == "pin":
            continue
        if k["how"] == "set" and k["kind"] in ("tile", "count"):   # an autotuned kernel's tile: around its pick
            v = launched.get(k["key"])
            if not isinstance(v, int) or v < 1:
                continue
            lo_val = 16 if k.get("dot") else 1
            hi_val = 64 if k["kind"] == "count" else max(v, MAX_DOT_TILE) if k.get("dot") else 1 << 16
            vals = [v << e if e >= 0 else v >> -e for e in range(-4, 5)]
            vals = sorted({x for x in vals if lo_val <= x <= hi_val and x >= 1} | {v})
            if len(vals) > 1:
                out.append(Domain(k["key"], k["kind"], vals, v, kernel, v, 1, True, dot=bool(k.get("dot"))))
            continue
        if k["how"] == "split":        # a split count: only smaller (fewer programs, each a larger share)
            v = launched.get(k["key"]) or k.get("value")
            exps = [e for e in range(-10, 1) if isinstance(v, int) and v >> -e >= 1]
            if len(exps) > 1:
                out.append(Domain(k["key"], "grid", exps, 0, kernel, v, -1))
            continue
        if k["kind"] == "loop":         # a loop's stages: 0 is the loop as written
            out.append(Domain(k["key"], "loop", [0, 1, 2, 3, 4], 0, kernel))
            continue
        if k["kind"] == "evict":        # a kernel's loads: 0 as written, 1 with eviction hints
            out.append(Domain(k["key"], "evict", [0, 1], 0, kernel))
            continue
        if k["how"] == "set":
            cur = launched.get(k["key"]) or k.get("value") or (4 if k["kind"] == "warps" else 3)
            pool = WARPS if k["kind"] == "warps" else STAGES
            vals = sorted(set(pool) | {int(cur)})
            out.append(Domain(k["key"], k["kind"], vals, int(cur), kernel))
            continue
        v = launched.get(k["key"])
        if v is None:
            v = k.get("value")
        lo_val = 16 if k.get("dot") else 1
        hi_val = 64 if k["kind"] == "count" else 1 << 16
        if k.get("dot") and v is not None:
            hi_val = max(v, MAX_DOT_TILE)
        if k["kind"] == "grid":     # a program count: up to 64 per SM of the largest device, never below 1
            lo_val, hi_val = 1, 132 * 64
        exps = [e for e in range(-8, 9)
                if v is None or lo_val <= (v << e if e >= 0 else v >> -e) <= hi_val and (e >= 0 or v >> -e << -e == v)]
        if v is None:
            exps = [e for e in range(-3, 4)]
        if len(exps) > 1:
            f = (fill or {}).get(kernel, 1.0)
            first = -1 if k.get("grid_tied") and k["kind"] != "grid" and f < 1.0 else 1
            step = None
            if first == -1 and f > 0:   # each halving of the tile doubles the programs
                want = -math.ceil(math.log2(1.0 / f))
                step = max((e for e in exps if e <= want), default=min(exps))
                step = step if step <= -2 else None     # one halving: the descent's own first step
            out.append(Domain(k["key"], k["kind"], exps, 0, kernel, v, first, fill_step=step, dot=bool(k.get("dot"))))
    return out


def _block(vals: list[int]) -> int:
    """A kernel's block: the product of its two largest tiles (a GEMM's accumulator, a 2-D tile)."""
    top = sorted(vals)[-2:]
    return top[0] * (top[1] if len(top) > 1 else 1)


def _tile_ok(cfg: dict[str, int], doms: list[Domain]) -> bool:
    """Each kernel's block stays under ``MAX_TILE_ELEMS`` (or what it was as launched), and a ``tl.dot`` kernel's
    accumulator per thread under ``MAX_ACC_PER_THREAD`` at its warps (or what it was as launched)."""
    per: dict[str, list[int]] = {}
    start: dict[str, list[int]] = {}
    dots: dict[str, list[int]] = {}
    dots0: dict[str, list[int]] = {}
    warps: dict[str, tuple[int, int]] = {}
    for d in doms:
        if d.kind == "warps":
            warps[d.kernel] = (cfg.get(d.key, d.start), d.start)
        if d.kind != "tile" or d.launched is None:
            continue
        e = cfg.get(d.key, d.start)
        v = e if d.absolute else max(1, d.launched << e if e >= 0 else d.launched >> -e)
        per.setdefault(d.kernel, []).append(v)
        start.setdefault(d.kernel, []).append(d.launched)
        if d.dot:
            dots.setdefault(d.kernel, []).append(v)
            dots0.setdefault(d.kernel, []).append(d.launched)
    if not all(_block(v) <= max(MAX_TILE_ELEMS, _block(start[k])) for k, v in per.items()):
        return False
    for k, (w, w0) in warps.items():
        if k in dots and _block(dots[k]) / (32 * w) > max(MAX_ACC_PER_THREAD, _block(dots0[k]) / (32 * w0)):
            return False
    return True


@dataclass
class Searcher:
    doms: list[Domain]
    evaluate: Callable[[dict[str, int]], float | None]
    budget_s: float
    max_trials: int = 200
    clock: Callable[[], float] = time.monotonic
    trials: list[Trial] = field(default_factory=list)
    _seen: dict[tuple, float | None] = field(default_factory=dict)

    #: trials an earlier attempt of the job finished (a configuration that faulted the process is among them,
    #: failed): not run again
    known: list[Trial] = field(default_factory=list)
    #: called with a configuration before it runs and with its trial after (the job's progress file)
    log: Callable[[str, dict], None] | None = None
    #: given the configurations the search is likely to try next, before it tries them (the job compiles them
    #: ahead in threads); it decides nothing
    prefetch: Callable[[list[dict[str, int]]], None] | None = None
    #: after the descent, combinations within this many values of the best (0: none; ``explore``)
    explore_steps: int = 0
    #: what was measured without the search asking (the job's waves time prefetched configurations): key -> ms
    measured: Callable[[], dict[tuple, float | None]] | None = None
    #: how many budgets the search may run while it improves (``EXTEND``; 1.0: never past the budget)
    extend: float = EXTEND
    #: the search's wall clock and its cap: ``clock`` may leave out what is not the search's own work (the job's
    #: clock leaves out its waits for the device lock), the wall cap bounds what it leaves out
    wall: Callable[[], float] = time.monotonic
    wall_cap_s: float = float("inf")
    #: why a configuration that ran failed (the job's screen errors), or None: a configuration that ran out of shared
    #: memory bounds every one that needs at least as much (``fits``)
    why_failed: Callable[[dict[str, int]], str] | None = None

    def __post_init__(self) -> None:
        self.out_of_smem: list[dict[str, int]] = []   # configurations that ran out of shared memory
        self.stopped = ""    # why ``left`` first said no ("": the search ran out of moves first)
        self.t0 = self.clock()
        self.wall0 = self.wall()
        self.improved_at = self.t0
        self.best_ms: float | None = None
        for t in self.known:
            self._seen[tuple(sorted(t.config.items()))] = t.ms
            self.trials.append(t)

    def left(self) -> bool:
        if len(self.trials) >= self.max_trials:
            self.stopped = self.stopped or f"{self.max_trials} trials"
            return False
        if self.wall() - self.wall0 >= self.wall_cap_s:
            self.stopped = self.stopped or f"wall cap {self.wall_cap_s:.0f} s reached"
            return False
        now = self.clock()
        spent = now - self.t0
        if spent < self.budget_s or (spent < self.budget_s * self.extend and now - self.improved_at < self.budget_s / 2):
            return True
        # why the search ended, for tune.json: the budget with no gain in its last half, or the stretch used up
        self.stopped = self.stopped or (
            f"budget {self.budget_s:.0f} s spent at {spent:.0f} s, last gain at {self.improved_at - self.t0:.0f} s"
            if spent < self.budget_s * self.extend else f"stretched budget {self.budget_s * self.extend:.0f} s spent"
            if self.extend > 1 else f"budget {self.budget_s:.0f} s spent, not to stretch (the batch's deadline near)")
        return False

    def _note(self, ms: float | None) -> None:
        """Keep the best time; a new best by ``MIN_STEP_GAIN`` restarts the improving clock (``left``)."""
        if ms is None:
            return
        if self.best_ms is not None and ms < self.best_ms * (1 - MIN_STEP_GAIN):
            self.improved_at = self.clock()
        self.best_ms = ms if self.best_ms is None else min(self.best_ms, ms)

    def jump(self, cur: dict[str, int], cur_t: float) -> tuple[dict[str, int], float] | None:
        """The best configuration measured so far (a wave's unasked ones included) that keeps every move of ``cur``,
        where it beats ``cur_t`` by ``MIN_STEP_GAIN``; else None. (One that drops a move would throw away what the
        descent found on that knob: H100 corpus batch of 2026-12-05, kernl_llama_ff's BLOCK_SIZE_M 16 -> 64, 3.3x,
        left for a wave's BLOCK_SIZE_N 16 -> 64 alone, and the search ended at 4.4x instead of 9.1x.)"""
        extra = self.measured() if self.measured is not None else {}
        for k, ms in extra.items():
            if k not in self._seen:
                self._seen[k] = ms
                self._note(ms)
                if ms is None:
                    self._failed(dict(k))
        keep = set(self.norm(cur).items())
        pool = [(ms, dict(k)) for k, ms in self._seen.items() if ms is not None and keep <= set(k)]
        if not pool:
            return None
        ms, cfg = min(pool, key=lambda x: x[0])
        return (self.norm(cfg), ms) if ms < cur_t * (1 - MIN_STEP_GAIN) else None

    def fits(self, cfg: dict[str, int]) -> bool:
        """Under the static bounds (``_tile_ok``) and not needing the shared memory of a configuration that ran out
        of it: every tile and ``num_stages`` at least that one's, its loop stages the same (warps, grid and counts do
        not size the pipeline's buffers). On the H100 corpus batch of 2026-12-06, 17 of an attention kernel's 85
        configurations compiled only to fail on shared memory, 7 of them with the tiles and stages of one before."""
        if not _tile_ok(cfg, self.doms):
            return False
        sized = [d for d in self.doms if d.kind in ("tile", "stages")]
        loops = [d for d in self.doms if d.kind == "loop"]
        for bad in self.out_of_smem:
            if all(cfg.get(d.key, d.start) >= bad.get(d.key, d.start) for d in sized) and \
                    all(cfg.get(d.key, d.start) == bad.get(d.key, d.start) for d in loops):
                return False
        return True

    def _failed(self, cfg: dict[str, int]) -> None:
        if self.why_failed is not None and SMEM_FAILURE in (self.why_failed(cfg) or ""):
            self.out_of_smem.append(cfg)

    def norm(self, cfg: dict[str, int]) -> dict[str, int]:
        starts = {d.key: d.start for d in self.doms}
        return {k: v for k, v in sorted(cfg.items()) if starts.get(k) != v}

    def run_one(self, cfg: dict[str, int], phase: str) -> float | None:
        cfg = self.norm(cfg)
        key = tuple(cfg.items())
        if key in self._seen:
            return self._seen[key]
        if not self.fits(cfg):
            self._seen[key] = None
            self.trials.append(Trial(config=cfg, status="too_large", phase=phase,
                                     note=f"a kernel's tile over {MAX_TILE_ELEMS} elements, its dot accumulator "
                                          f"over {MAX_ACC_PER_THREAD} per thread, or at least the tiles and stages of "
                                          f"a configuration that ran out of shared memory"))
            return None
        if not self.left():
            return None
        if self.log:
            self.log("start", {"config": cfg})
        t = self.evaluate(cfg)
        self._seen[key] = t
        self._note(t)
        if t is None:
            self._failed(cfg)
        trial = Trial(config=cfg, status="ok" if t is not None else "failed", ms=t, phase=phase)
        self.trials.append(trial)
        if self.log:
            self.log("trial", trial.model_dump())
        return t

    def ahead(self, cur: dict[str, int], doms: list[Domain], steps: int = 2) -> None:
        """Hand ``prefetch`` each knob of ``doms`` moved up to ``steps`` values either way from ``cur`` (the
        likelier way first), skipping configurations already run or over the tile bound."""
        if self.prefetch is None:
            return
        # breadth first: every knob's nearest value the likelier way, then the other way, then the next values; a
        # wave takes these in order, so each knob gets its first step in the first waves (H100 corpus batch of
        # 2026-12-05: an int4 matmul's first waves held only its tiles' values, the budget ended behind the other
        # tasks' locks, and num_stages 2 -> 1, its 3.6x on the H200 the day before, was never timed)
        out: list[dict[str, int]] = []
        if not cur:   # a tile whose grid leaves SMs idle: the value that fills them, in the first wave (the descent
            # walks there a halving at a time: H100 corpus batch of 2026-12-05, flaggems_argmax's 2 programs on 132 SMs,
            # its search ran out of budget at the first halving)
            for d in doms:
                if d.fill_step is not None and d.fill_step in d.values:
                    cfg = self.norm({d.key: d.fill_step})
                    if tuple(cfg.items()) not in self._seen and self.fits(cfg):
                        out.append(cfg)
        for j in range(1, steps + 1):
            for way in (1, -1):
                for d in doms:
                    i = d.values.index(cur.get(d.key, d.start)) + way * d.first * j
                    if 0 <= i < len(d.values):
                        cfg = self.norm(dict(cur, **{d.key: d.values[i]}))
                        if tuple(cfg.items()) not in self._seen and self.fits(cfg) and cfg not in out:
                            out.append(cfg)
        if out:
            self.prefetch(out)

    def ahead_line(self, cur: dict[str, int], d: Domain, i: int, step: int, n: int = 3) -> None:
        """Hand ``prefetch`` the next ``n`` values of ``d`` along a sweep from index ``i`` (``cur`` otherwise)."""
        if self.prefetch is None:
            return
        cfgs = [self.norm(dict(cur, **{d.key: d.values[i + step * j]})) for j in range(n)
                if 0 <= i + step * j < len(d.values)]
        cfgs = [c for c in cfgs if tuple(c.items()) not in self._seen and self.fits(c)]
        if cfgs:
            self.prefetch(cfgs)

    def best(self) -> tuple[dict[str, int], float | None]:
        ok = [t for t in self.trials if t.ms is not None]
        if not ok:
            return {}, None
        b = min(ok, key=lambda t: t.ms)
        return dict(b.config), b.ms

    def search(self) -> list[Trial]:
        order = sorted(self.doms, key=lambda d: {"grid": 0, "tile": 1, "count": 2, "warps": 3, "stages": 4, "loop": 5,
                                                  "evict": 6}[d.kind])
        self.ahead({}, order)
        base = self.run_one({}, "as launched")
        if base is None:
            return self.trials
        cur, cur_t = {}, base
        for again in range(1 + RECENTER):
            cur, cur_t = self.descend(cur, cur_t, order, "sweep" if again == 0 else "line")
            if not self.explore_steps or not self.left():
                break
            self.explore(cur)
            best, best_t = self.best()
            if best_t is None or best_t >= cur_t * (1 - MIN_STEP_GAIN):
                break
            cur, cur_t = self.norm(best), best_t   # the descent again, from what explore found
        return self.trials

    def descend(self, cur: dict[str, int], cur_t: float, order: list[Domain], first: str
                ) -> tuple[dict[str, int], float]:
        """Coordinate descent with runs from ``cur``: each knob stepped its likelier way first, on while it pays;
        the best configuration and its time."""
        for rnd in range(4):          # coordinate descent with runs, from the best so far
            improved = False
            for d in order:
                better = self.jump(cur, cur_t)
                if better is not None:   # a wave measured it ahead of the descent
                    (cur, cur_t), improved = better, True
                if cur:
                    self.ahead(cur, [d], 3)
                pos = d.values.index(cur.get(d.key, d.start))
                for step in (d.first, -d.first):   # the likelier way first; the other only if that one did not pay
                    moved, misses, i = False, 0, pos + step
                    # a loop's stages are tried all the way: its pipeliner may only pay at 3 or 4 stages (H200
                    # corpus batch of 2026-12-05: alf_diag_ssm's loop measured 1.00x at 1 stage and 0.88x at 2, and
                    # the sweep stopped there; the pipelining family's 3-4 stages had measured 2.24x)
                    limit = len(d.values) if d.kind == "loop" else (2 if rnd == 0 else 1)
                    while 0 <= i < len(d.values) and misses < limit and self.left():
                        self.ahead_line(cur, d, i, step)
                        t = self.run_one(dict(cur, **{d.key: d.values[i]}), first if rnd == 0 else "line")
                        if t is None:
                            break
                        if t < cur_t * (1 - MIN_STEP_GAIN):
                            cur, cur_t, misses, moved = self.norm(dict(cur, **{d.key: d.values[i]})), t, 0, True
                        else:
                            misses += 1
                        i += step
                    if moved:
                        improved = True
                        break
            if not improved or not self.left():
                break
        return cur, cur_t

    def explore(self, cur: dict[str, int]) -> None:
        """What the descent cannot see, in the budget it left: every combination of the knobs within
        ``explore_steps`` values of the best so far, nearest first (fewest knobs moved, then fewest steps), handed to
        ``prefetch`` a wave at a time. Knobs interact (a larger block wants more warps; a smaller tile, more stages)
        where one knob at a time finds no step that pays: the descent stopped after 4-21 configurations on the
        H200 corpus batches of 2026-12-04/05 with most of its budget left."""
        import itertools
        axes = []
        for d in self.doms:
            if d.kind == "evict":   # where lines live, not the tile's shape: the descent's to set, not a dimension
                continue            # that doubles the combinations (flaggems_max: 19 -> 254 configurations)
            pos = d.values.index(cur.get(d.key, d.start))
            axes.append([(d.key, d.values[i], abs(i - pos)) for i in
                         range(pos - self.explore_steps, pos + self.explore_steps + 1) if 0 <= i < len(d.values)])
        if not axes:
            return
        combos = []
        for pick in itertools.product(*axes):
            moved = [x for x in pick if x[2]]
            if len(moved) < 2:          # single moves: the descent's own ground
                continue
            cfg = self.norm(dict(cur, **{k: v for k, v, _ in pick}))
            if tuple(cfg.items()) in self._seen or not self.fits(cfg):
                continue
            combos.append((len(moved), sum(x[2] for x in moved), cfg))
            if len(combos) > 20000:
                break
        combos.sort(key=lambda c: (c[0], c[1]))
        for i in range(0, len(combos), EXPLORE_WAVE):
            if not self.left():
                return
            chunk = [c[2] for c in combos[i:i + EXPLORE_WAVE]]
            if self.prefetch is not None:
                self.prefetch(chunk)
            for cfg in chunk:
                if not self.left():
                    return
                self.run_one(cfg, "explore")


def top(trials: list[Trial], n: int) -> list[Trial]:
    """The ``n`` fastest distinct configurations that ran."""
    ok = sorted((t for t in trials if t.ms is not None), key=lambda t: t.ms)
    return ok[:n]
