"""A measured launch-space search: enumerate each launch's configurations, prune by evidence, emit a bounded set.

For every kernel the launch analysis (``launches.py``) can set, the space is the product of its tunable block
constexprs (launch_config's tunables: a flat block, a loop step, or a matmul M/N/K tile), num_warps and, where
the kernel loops, num_stages; each kernel is searched with the others at their current values. Configurations
are pruned without a GPU:

- static bounds: pipelined operand buffers of a matmul tile over the 227 KB of shared memory a program may use
  on sm_90; an fp32 accumulator needing more than 255 registers per thread; more threads than block elements;
  more than ``MAX_ELEMS_PER_THREAD`` elements per thread of a flat block; a block smaller than the current one
  where the kernel may rely on it covering a row (launch_config's "other" role);
- ptxas (compile-only for cuda:90, through ``compile_fn``) for the best-ranked survivors: shared memory over the
  limit, registers x threads over the 64K register file, spilled bytes.

What is left is ranked (launch_config's measured priors first, then by closeness to them) and cut to the number of
configurations the device budget pays for: ``budget_s / per_config_s`` (both configurable). Every configuration
gets a ``ConfigRecord`` (emitted, pruned and why, or over budget), which is the evidence the trail keeps; the
verifier times the emitted candidates side by side in one bench job and fills ``measured_ms``.

Without a backend that can time (the CPU interpreter), ``plan`` emits at most the single best-ranked configuration
and the ``launch_search`` family emits nothing (launch_config proposes that configuration first anyway): the
search must not flood a round whose candidates nobody can time.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, Field
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.launch_config import (
    ATTN_SPACE,
    DEFAULT_OPTIONS,
    FLAT_SPACE,
    MATMUL_SPACE,
    SM90_SMEM_PER_PROGRAM,
    _attention_params,
    _matmul_params,
    _warps_only,
    apply_config,
    current_options,
    prepare,
)
from tritondx.tools.rewrite.cst_util import code_of, jit_functions, parse

#: registers of one SM (and the most one program may use) on sm_90
SM90_REGISTERS = 65536
MAX_ELEMS_PER_THREAD = 64
MAX_ACC_REGS = 255
DEFAULT_BUDGET_S = 30.0
#: seconds one emitted configuration costs the round: its verification (listed and derived cases, its own
#: compile) and its share of the bench job. Measured on the H200 (2026-12-01, 10 tasks sharing the host):
#: a round's judge job took 277 s for 13 candidates, 153 s for 3, 83 s for 1 (the 3.0 s this was before made
#: the search emit 10 configurations a round, which no 8-task batch could afford)
DEFAULT_PER_CONFIG_S = 10.0
MAX_CONFIGS = 32
#: configurations checked with ptxas (compile-only, CPU) before the cut, at most twice what is emitted
DEFAULT_COMPILE_CHECKS = 12
#: compile-only jobs at once (each a sandboxed process; they were one after another: 36-147 s a search)
COMPILE_JOBS = max(1, min(4, (os.cpu_count() or 2) // 2))

MM_BLOCKS = (64, 128, 256)
MM_K = (32, 64, 128)
FLAT_BLOCKS = tuple(1 << i for i in range(8, 15))     # 256 ... 16384
WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3, 4, 5)

#: compile_fn(candidate source) -> [{"kernel": name, "registers": int, "shared_bytes": int, "spill_bytes": int,
#: "num_warps": int}] (one per compiled launch) or None when it could not compile
CompileFn = Callable[[str], list[dict] | None]


class ConfigRecord(BaseModel):
    """One configuration of the launch space and what became of it."""

    config_id: str
    kernel: str
    values: dict[str, int]
    status: Literal["emitted", "pruned", "over_budget", "measured"] = "emitted"
    reason: str = ""
    evidence: dict[str, float] = Field(default_factory=dict)   # registers, shared_bytes, spill_bytes, ...
    rank: int = 0
    measured_ms: float | None = None


class SearchPlan(BaseModel):
    budget_s: float
    per_config_s: float
    max_configs: int
    can_time: bool
    records: list[ConfigRecord] = Field(default_factory=list)
    #: config_id -> candidate source, for the emitted records (time them side by side in one bench job)
    sources: dict[str, str] = Field(default_factory=dict)

    def emitted(self) -> list[ConfigRecord]:
        """The emitted configurations, best-ranked first."""
        return sorted((r for r in self.records if r.status == "emitted"), key=lambda r: r.rank)


def _has_loop(kernel_src: str) -> bool:
    return "for " in kernel_src and "range(" in kernel_src


def kernel_space(kernel: str, tunables: dict, options: dict[str, int], kernel_src: str, elem_bytes: int,
                 override_warps: bool = False) -> list[tuple[dict[str, int], str]]:
    """[(values, prune reason or "")] of one kernel, its current configuration excluded. ``override_warps``:
    search num_warps even where the launcher computes it (a kernel whose blocks cannot move)."""
    cur = {**options, **{p: t.value for p, t in tunables.items()}}
    warps_fixed = options.get("num_warps", 4) < 0 and not override_warps
    stages_fixed = options.get("num_stages", 3) < 0 or not _has_loop(kernel_src)
    warps = (cur.get("num_warps"),) if warps_fixed else WARPS
    stages = (None,) if stages_fixed else STAGES
    out: list[tuple[dict[str, int], str]] = []
    mm = _matmul_params(list(tunables))
    att = _attention_params(kernel_src, list(tunables))
    if att:
        for bm, bn, w, s in ATTN_SPACE:
            v = {att["M"]: bm, att["N"]: bn, "num_warps": w}
            if not stages_fixed:
                v["num_stages"] = s
            out.append((v, ""))
    elif mm:
        for bm, bn, bk, w, s in itertools.product(MM_BLOCKS, MM_BLOCKS, MM_K, (4, 8) if not warps_fixed else warps,
                                                  (2, 3, 4, 5) if not stages_fixed else stages):
            v = {mm["M"]: bm, mm["N"]: bn, mm["K"]: bk, "num_warps": w}
            if s is not None:
                v["num_stages"] = s
            out.append((v, _mm_reason(bm, bn, bk, w, s or 3, elem_bytes)))
    elif len(tunables) == 1:
        (p, t), = tunables.items()
        for b, w, s in itertools.product(FLAT_BLOCKS, warps, stages if t.role == "loop" else (None,)):
            v = {p: b, "num_warps": w}
            if s is not None:
                v["num_stages"] = s
            out.append((v, _flat_reason(b, w, t.role, t.value)))
    elif not tunables:
        for w, s in itertools.product(warps, stages):
            v = {"num_warps": w}
            if s is not None:
                v["num_stages"] = s
            out.append((v, ""))
    out = [(v, r) for v, r in out if any(cur.get(k, DEFAULT_OPTIONS.get(k)) != x for k, x in v.items())]
    return out


def _mm_reason(bm: int, bn: int, bk: int, warps: int, stages: int, elem: int) -> str:
    smem = stages * (bm * bk + bk * bn) * elem
    if smem > SM90_SMEM_PER_PROGRAM:
        return (f"operand buffers {stages} x ({bm}x{bk} + {bk}x{bn}) x {elem} B = {smem} B > "
                f"{SM90_SMEM_PER_PROGRAM} B of shared memory per program (sm_90)")
    acc = bm * bn // (32 * warps)
    if acc > MAX_ACC_REGS:
        return f"fp32 accumulator {bm}x{bn} over {warps} warps = {acc} registers/thread > {MAX_ACC_REGS}"
    return ""


def _flat_reason(block: int, warps: int, role: str, current: int) -> str:
    threads = 32 * warps
    if threads > block:
        return f"{threads} threads for {block} elements: idle threads"
    if role == "flat" and block // threads > MAX_ELEMS_PER_THREAD:
        return f"{block // threads} elements per thread > {MAX_ELEMS_PER_THREAD}: register pressure"
    if role == "other" and block < current:
        return f"block {block} < {current}: the kernel may rely on the block covering a whole row"
    return ""


def _log2(v: int) -> float:
    return float(max(v, 1).bit_length() - 1)


def _priors(values: dict[str, int], mm: bool) -> list[dict[str, int]]:
    names = list(values)
    blocks = [k for k in names if k not in ("num_warps", "num_stages")]
    if mm and len(blocks) == 3:
        return [dict(zip(blocks + ["num_warps", "num_stages"], c)) for c in MATMUL_SPACE]
    if len(blocks) == 1:
        return [{blocks[0]: b, "num_warps": w} for b, w in FLAT_SPACE]
    return [{"num_warps": w} for w in (8, 4, 16, 2)]


def _prior_rank(values: dict[str, int], mm: bool) -> tuple:
    """launch_config's measured priors first (in their order), then by log2 distance to the nearest prior."""
    priors = _priors(values, mm)
    for i, pr in enumerate(priors):
        if all(values.get(k) == v for k, v in pr.items()):
            return (0, float(i), tuple(values.values()))
    dist = min(sum(abs(_log2(values[k]) - _log2(v)) for k, v in pr.items() if k in values) for pr in priors)
    return (1, dist, tuple(values.values()))


def plan(ctx: RewriteContext, compile_fn: CompileFn | None = None, budget_s: float | None = None,
         per_config_s: float | None = None, compile_checks: int = DEFAULT_COMPILE_CHECKS,
         exclude: frozenset[str] = frozenset()) -> SearchPlan:
    """The search over the launch space of ``ctx.spec`` (see the module doc). ``exclude``: sources another
    family already proposes this round (launch_config's): not emitted again, so the budget buys new ones."""
    budget = budget_s if budget_s is not None else ctx.search_budget_s
    per = per_config_s if per_config_s is not None else DEFAULT_PER_CONFIG_S
    max_configs = max(1, min(MAX_CONFIGS, int(budget // per))) if ctx.can_time else 1
    out = SearchPlan(budget_s=budget, per_config_s=per, max_configs=max_configs, can_time=ctx.can_time)
    source = ctx.spec.source
    prepared, tunables = prepare(source)
    options = current_options(prepared)
    kernels = jit_functions(parse(prepared))
    by_kernel: dict[str, dict] = {}
    for t in tunables:
        by_kernel.setdefault(t.kernel, {})[t.param] = t
    warps_only = set(_warps_only(prepared, set(by_kernel), options))
    for k in warps_only:
        by_kernel.setdefault(k, {})
    elem = 4 if any(d in ("float32", "torch.float32") for d in ctx.dtypes) else 2
    survivors: list[ConfigRecord] = []
    n = 0
    for kname, tun in by_kernel.items():
        if kname not in kernels:
            continue
        ksrc = code_of(kernels[kname])
        mm = bool(_matmul_params(list(tun)))
        for values, reason in kernel_space(kname, tun, options.get(kname, dict(DEFAULT_OPTIONS)), ksrc, elem,
                                           override_warps=kname in warps_only):
            n += 1
            rec = ConfigRecord(config_id=f"ls{n}", kernel=kname, values=values)
            if reason:
                rec.status, rec.reason = "pruned", reason
                out.records.append(rec)
                continue
            rank = _prior_rank(values, mm)
            rec.evidence.update({"prior": float(rank[0] == 0), "distance_to_prior": rank[1] if rank[0] else 0.0})
            survivors.append(rec)
            out.records.append(rec)
    survivors.sort(key=lambda r: _prior_rank(r.values, bool(_matmul_params(list(by_kernel[r.kernel])))))
    compiled = _compile_ahead(survivors, source, compile_fn, min(compile_checks, 2 * max_configs), exclude)
    emitted = 0
    checked = 0
    for i, rec in enumerate(survivors):
        rec.rank = i + 1
        if emitted >= max_configs:
            rec.status, rec.reason = "over_budget", (f"rank {rec.rank}: the budget ({budget:g} s at {per:g} s per "
                                                     f"configuration) pays for {max_configs}"
                                                     if ctx.can_time else
                                                     "backend cannot time: one configuration emitted")
            continue
        cand = apply_config(source, {rec.kernel: rec.values})
        if cand == source:
            rec.status, rec.reason = "pruned", "the launch analysis cannot set these values where they are defined"
            continue
        if cand in exclude:
            rec.status, rec.reason = "pruned", "launch_config proposes this configuration this round"
            continue
        if rec.config_id in compiled and checked < compile_checks:
            checked += 1
            why = _ptxas_reason(rec, compiled[rec.config_id])
            if why:
                rec.status, rec.reason = "pruned", why
                continue
        out.sources[rec.config_id] = cand
        emitted += 1
    return out


def _compile_ahead(survivors: list[ConfigRecord], source: str, compile_fn: CompileFn | None,
                   n: int, exclude: frozenset[str] = frozenset()) -> dict[str, list[dict] | None]:
    """ptxas' figures for the ``n`` best-ranked survivors that change the source, compiled ``COMPILE_JOBS``
    at a time (each compile is its own sandboxed job)."""
    if compile_fn is None or n <= 0:
        return {}
    todo: list[tuple[str, str]] = []
    for rec in survivors:
        if len(todo) >= n:
            break
        cand = apply_config(source, {rec.kernel: rec.values})
        if cand != source and cand not in exclude:
            todo.append((rec.config_id, cand))
    many = getattr(compile_fn, "many", None)
    if many is not None and len(todo) > 1:
        # several candidates per job (``ptxas_compile_fn``'s ``many``): one Python start and torch import per job
        k = min(COMPILE_JOBS, len(todo))
        chunks = [todo[i::k] for i in range(k)]
        with ThreadPoolExecutor(max_workers=k) as pool:
            done = list(pool.map(lambda chunk: many([src for _, src in chunk]), chunks))
        return {cid: res for chunk, results in zip(chunks, done) for (cid, _), res in zip(chunk, results)}
    with ThreadPoolExecutor(max_workers=min(COMPILE_JOBS, len(todo)) or 1) as pool:
        results = list(pool.map(lambda item: compile_fn(item[1]), todo))
    return {cid: res for (cid, _), res in zip(todo, results)}


def _ptxas_reason(rec: ConfigRecord, launches: list[dict] | None) -> str:
    if launches is None:
        return "does not compile for cuda:90"
    mine = [x for x in launches if x.get("kernel") == rec.kernel]
    for x in mine:
        regs, smem = int(x.get("registers", 0) or 0), int(x.get("shared_bytes", 0) or 0)
        spill, warps = int(x.get("spill_bytes", 0) or 0), int(x.get("num_warps", rec.values.get("num_warps", 4)))
        rec.evidence.update({"registers": regs, "shared_bytes": smem, "spill_bytes": spill})
        if smem > SM90_SMEM_PER_PROGRAM:
            return f"ptxas: {smem} B shared memory > {SM90_SMEM_PER_PROGRAM} B per program (sm_90)"
        if regs * 32 * warps > SM90_REGISTERS:
            return f"ptxas: {regs} registers x {32 * warps} threads > {SM90_REGISTERS} registers of an SM"
        if spill:
            return f"ptxas: {spill} B spilled to local memory"
        if regs:
            rec.evidence["programs_per_sm"] = float(min(32, SM90_REGISTERS // (regs * 32 * warps),
                                                        SM90_SMEM_PER_PROGRAM // max(smem, 1) if smem else 32))
    return ""


@rewrite("launch_search", "measured launch-space search: block constexprs x num_warps x num_stages per launch, "
                          "pruned by shared memory / registers / spills, bounded by a device-seconds budget",
         priority=60, also=("launch_config",), batch=True)
def launch_search(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("launch_search") or ctx.motivating("launch_config")
    # without timing the family emits nothing: launch_config already proposes the evidence-preferred configuration
    # first, and an untimed launch configuration proves nothing (nor after launch_config's went unmeasured)
    if not motivating or not ctx.can_time or "launch_config" in ctx.unmeasured_families:
        return []
    from tritondx.tools.rewrite.launch_config import launch_config as _launch_config
    p = plan(ctx, compile_fn=ctx.compile_fn, exclude=frozenset(x.source for x in _launch_config(ctx)))
    ids = [f.id for f in motivating]
    records = {r.config_id: r for r in p.records}
    out = []
    for cid, src in p.sources.items():
        r = records[cid]
        out.append(Proposal(
            "launch_search", src, {r.kernel: r.values, "config_id": cid, "rank": r.rank,
                                   "space": len(p.records), "pruned": sum(x.status == "pruned" for x in p.records)},
            f"{r.kernel}: " + ", ".join(f"{k}={v}" for k, v in r.values.items()) + f" (search rank {r.rank} of "
            f"{len(p.records)} configurations, {sum(x.status == 'pruned' for x in p.records)} pruned)",
            ids, "one point of the launch space, timed side by side with the others of the search"))
    ctx.search_records = [r.model_dump() for r in p.records]
    return out


def ptxas_compile_fn(task_path: str, workdir, target: str = "cuda:90") -> CompileFn:
    """A CompileFn that compiles a candidate for ``target`` without a GPU (a sandboxed capture job, the task's
    BENCH shape) and returns ptxas' figures per launch: evidence for pruning before any device time is spent.
    Its ``many(sources)`` compiles several candidates in one capture job (``capture_many``, no SASS)."""
    from pathlib import Path

    from tritondx.tools.verify.api import capture_ir, capture_many

    import threading

    folder = Path(workdir)
    counter = [0]
    lock = threading.Lock()  # plan() runs several compiles at once

    def _folder() -> Path:
        with lock:
            counter[0] += 1
            d = folder / f"c{counter[0]}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _figures(manifest: dict | None) -> list[dict] | None:
        if manifest is None:
            return None
        out = []
        for rec in manifest.get("launches", []):
            if "kernel" not in rec:
                continue
            r = rec.get("resources", {})
            out.append({"kernel": rec["kernel"], "registers": r.get("registers", 0),
                        "shared_bytes": r.get("shared_bytes", 0),
                        "spill_bytes": r.get("spill_store_bytes", 0) + r.get("spill_load_bytes", 0),
                        "num_warps": rec.get("options", {}).get("num_warps", 4)})
        return out

    def fn(source: str) -> list[dict] | None:
        d = _folder()
        cand = d / Path(task_path).name
        cand.write_text(source)
        manifest, _err = capture_ir(str(cand), d / "ir", target, per_pass=False)
        return _figures(manifest)

    def many(sources: list[str]) -> list[list[dict] | None]:
        d = _folder()
        paths = []
        for i, source in enumerate(sources):
            (d / f"s{i}").mkdir(exist_ok=True)
            cand = d / f"s{i}" / Path(task_path).name
            cand.write_text(source)
            paths.append(str(cand))
        answers, _problem = capture_many(paths, d / "ir", target)
        if answers is None:   # the job failed as a whole (one candidate crashed it?): each in a job of its own
            return [fn(source) for source in sources]
        return [_figures(m) for m, _err in answers]

    fn.many = many
    return fn
