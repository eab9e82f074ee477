"""Rewrite families for the Ascend NPU findings (``tools/npu/detectors/``).

- ``grid_fold_to_cores`` (ascend_grid_over_65535, ascend_grid_exceeds_cores): the persistent-programs
  rewrite of ``persistent.py`` with the NPU's AI-core count instead of SMs: the launcher launches
  ``min(tiles, cores)`` programs, each looping over ``range(tl.program_id(0), NUM_TILES, NUM_PROGS)``.
  The core count is read at launch time from triton-ascend's driver (``num_vectorcore`` for vector
  kernels, ``num_aicore`` for kernels with ``tl.dot``, which run on the AI/cube cores), as the
  capture's stand-in driver also answers from the target table; 4 where no NPU driver answers (the
  Triton interpreter), so the loop is exercised there. Folding cannot add programs: too few programs
  is ``split_blocks_for_cores``'s finding.
- ``remove_gpu_launch_settings`` (ascend_gpu_launch_settings): drops ``num_warps``, ``num_stages``,
  ``num_ctas`` and ``maxnreg`` from the kernel launches and from ``triton.Config`` entries.
- ``int32_indices`` (ascend_int64_index_math): ``index_width``'s narrowing: ``pid.to(tl.int64)``
  becomes ``pid.to(tl.int64 if WIDE_INDEX else tl.int32)``, ``WIDE_INDEX`` decided by the launcher.
  Other int64 sources (loaded int64 indices, int64 strides) are not rewritten.
- ``block_multiple_of_16`` (ascend_dot_block_not_multiple_of_16): the launcher's values of the
  constexprs whose value is an unaligned tl.dot dimension become the next / previous power of two that
  is a multiple of 16 (32 for an int8 K); only for kernels whose every load and store is masked
  (padding the tile must not read or write out of bounds).
- ``ub_retile`` (ascend_ub_overflow, ascend_multibuffer_headroom): one block constexpr (the one that
  is a dimension of the largest buffer, else the largest ``BLOCK*`` one) is divided by the power of
  two that brings the detector's estimate under the unified buffer (and once more, for headroom).
- ``split_blocks_for_cores`` (ascend_too_few_programs): for a kernel launched once over
  ``(triton.cdiv(n, BLOCK),)`` with a power-of-two constexpr BLOCK set in the launcher, program offsets
  ``pid * BLOCK`` and every load / store masked, BLOCK is divided by the smallest power of two that gives
  at least as many programs as the detector's core count (vector cores, AI cores for tl.dot kernels), and
  for a second candidate twice that; never below 256 elements (16 for tl.dot kernels). Row-wise kernels
  (one program per row, grid ``(M,)``) and unmasked kernels are left alone (``split_plan`` says why).

None of these were timed on an NPU: the predictions are what the Ascend documentation leads one to
expect, the evidence we can check offline is that the finding no longer fires on the candidate's IR.
"""

from __future__ import annotations

import re

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    calls_named,
    constexpr_names,
    dotted,
    jit_functions,
    int_value,
    kwarg,
    local_assignment,
    parse,
    with_args,
)
from tritondx.tools.rewrite.launch_sites import launch_sites
from tritondx.tools.rewrite.launch_values import (
    current_launch_values,
    set_launch_values,
)
from tritondx.tools.rewrite.index_width import index_source
from tritondx.tools.rewrite.launch_config import apply_config
from tritondx.tools.rewrite.persistent import persistent_source

#: the families of this module (CUDA showcases and suite coverage leave them out: their findings come only
#: from the Ascend detectors; tests/cpu/npu/test_ascend_rewrites.py covers them)
ASCEND_FAMILIES = ("grid_fold_to_cores", "remove_gpu_launch_settings", "int32_indices", "block_multiple_of_16",
                   "ub_retile", "split_blocks_for_cores")

NPU_CORES_HELPER = '''
def _tdx_npu_cores(t, prop="num_vectorcore"):
    """AI cores one launch can fill on the NPU, as triton-ascend's driver reports them: ``prop`` is
    "num_aicore" (the cube cores) for kernels using tl.dot, "num_vectorcore" otherwise; 4 where no NPU
    driver answers (e.g. the Triton interpreter), so the per-program loop still runs there."""
    try:
        drv = triton.runtime.driver.active
        props = drv.utils.get_device_properties(drv.get_current_device())
        return int(props[prop])
    except Exception:
        return 4
'''


def _kernels_of(findings) -> set[str]:
    return {f.kernel for f in findings if f.kernel}


# ------------------------------------------------------------------------------------------------
# grid_fold_to_cores
# ------------------------------------------------------------------------------------------------

FOLDING_DETECTORS = ("ascend_grid_over_65535", "ascend_grid_exceeds_cores")


@rewrite("grid_fold_to_cores", "Ascend: fold a 1-D grid onto the AI cores, each program loops over its tiles",
         priority=35)
def grid_fold_to_cores(ctx: RewriteContext) -> list[Proposal]:
    motivating = [f for f in ctx.motivating("grid_fold_to_cores") if f.detector in FOLDING_DETECTORS]
    if not motivating:
        return []
    module = parse(ctx.spec.source)
    kernels = jit_functions(module)
    wanted = _kernels_of(motivating) & set(kernels)
    cube = {n for n in wanted if calls_named(kernels[n], "tl.dot")}

    def count(tensor: str, kernel: str, k: int) -> str:
        # the property named at the call (no branch in the helper: its driver path runs only on an NPU)
        prop = ', "num_aicore"' if kernel in cube else ""
        return f"_tdx_npu_cores({tensor}{prop})"

    src, done = persistent_source(ctx.spec.source, {n: 1 for n in wanted}, helper=NPU_CORES_HELPER, count=count)
    if not done:
        return []
    over = any(f.detector == "ascend_grid_over_65535" for f in motivating)
    cores = {f.kernel: f.metric.get("cores") for f in motivating if f.metric.get("cores")}
    desc = ", ".join(f"{n}: one program per {'AI (cube)' if n in cube else 'vector'} core"
                     + (f" ({cores[n]} on the target)" if n in cores else "") for n in done)
    return [Proposal("grid_fold_to_cores", src, {"kernels": sorted(done), "cube": sorted(cube & set(done))},
                     f"grid folded onto the NPU cores: {desc}", [f.id for f in motivating],
                     ("the launch is accepted without TRITON_ALL_BLOCKS_PARALLEL (at most one program per core) "
                      "and " if over else "")
                     + "each core starts once and loops over its share of the tiles instead of running many waves "
                       "of short programs: per-program start-up and scalar set-up paid once per core (untested on "
                       "NPU hardware)")]


# ------------------------------------------------------------------------------------------------
# remove_gpu_launch_settings
# ------------------------------------------------------------------------------------------------

GPU_ONLY = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: triton.Config(kwargs, num_warps, num_stages, num_ctas, maxnreg, pre_hook, ...) positional slots
CONFIG_POSITIONS = {1: "num_warps", 2: "num_stages", 3: "num_ctas", 4: "maxnreg"}


def drop_gpu_settings(source: str) -> tuple[str, list[str]]:
    module = parse(source)
    kernels = set(jit_functions(module))
    dropped: list[str] = []

    class T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            launch = isinstance(updated.func, cst.Subscript) and dotted(updated.func.value) in kernels
            config = dotted(updated.func) in ("triton.Config", "Config")
            if not (launch or config):
                return updated
            keep = []
            positional = [a for a in updated.args if a.keyword is None and not a.star]
            if config and len(positional) > 5:
                return updated
            pos = 0
            for a in updated.args:
                name = a.keyword.value if a.keyword is not None else None
                if name is None and config and not a.star:
                    name = CONFIG_POSITIONS.get(pos)
                    pos += 1
                if name in GPU_ONLY:
                    dropped.append(f"{'triton.Config' if config else dotted(updated.func.value)}: {name}")
                    continue
                keep.append(a)
            return with_args(updated, keep) if len(keep) != len(updated.args) else updated

    new = module.visit(T())
    return (new.code, dropped) if dropped else (source, [])


@rewrite("remove_gpu_launch_settings", "Ascend: drop GPU-only launch settings (num_warps, num_stages, ...)",
         priority=70)
def remove_gpu_launch_settings(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("remove_gpu_launch_settings")
    if not motivating:
        return []
    src, dropped = drop_gpu_settings(ctx.spec.source)
    if not dropped:
        return []
    return [Proposal("remove_gpu_launch_settings", src, {"dropped": sorted(set(dropped))},
                     "GPU-only launch settings dropped: " + ", ".join(dict.fromkeys(dropped)),
                     [f.id for f in motivating],
                     "no speed change on the NPU (the Ascend SIMD path ignores warps and GPU pipelining stages); "
                     "the launch states only what Ascend uses, so tuning is not misled by dead knobs")]


# ------------------------------------------------------------------------------------------------
# int32_indices
# ------------------------------------------------------------------------------------------------

@rewrite("int32_indices", "Ascend: 32-bit index math unless the sizes need 64 bits (launcher-time check)",
         priority=42)
def int32_indices(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("int32_indices")
    if not motivating:
        return []
    src, done = index_source(ctx.spec.source, widen_ok=False)
    if not done:
        return []
    return [Proposal("int32_indices", src, {"kernels": done}, "; ".join(f"{k}: {v}" for k, v in done.items()),
                     [f.id for f in motivating],
                     "i32 instead of emulated i64 vector index arithmetic on the Ascend vector unit (no native "
                     "64-bit integer lanes) below 2**30 elements; offsets stay 64-bit above (untested on NPU "
                     "hardware)")]


# ------------------------------------------------------------------------------------------------
# block_multiple_of_16
# ------------------------------------------------------------------------------------------------

def _element_bytes(dtype: str) -> int:
    m = re.search(r"(\d+)", dtype or "")
    return max(1, int(m.group(1)) // 8) if m else 2


def _pow2_up(v: int, lo: int) -> int:
    p = lo
    while p < v:
        p *= 2
    return p


def _pow2_down(v: int, lo: int) -> int:
    p = lo
    while p * 2 <= v:
        p *= 2
    return p


def _all_masked(fn: cst.FunctionDef) -> bool:
    accesses = calls_named(fn, "tl.load") + calls_named(fn, "tl.store")
    return bool(accesses) and all(kwarg(c, "mask") is not None for c in accesses)


@rewrite("block_multiple_of_16", "Ascend: tl.dot block sizes rounded to multiples of 16 (cube fractals)",
         priority=45)
def block_multiple_of_16(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("block_multiple_of_16")
    if not motivating:
        return []
    module = parse(ctx.spec.source)
    kernels = jit_functions(module)
    out = []
    for direction in ("up", "down"):
        values: dict[str, dict[str, int]] = {}
        for f in motivating:
            fn = kernels.get(f.kernel)
            if fn is None or not _all_masked(fn) or not all(isinstance(f.metric.get(d), int) for d in "MNK"):
                continue
            k_lo = max(16, 32 // _element_bytes(str(f.metric.get("dtype", ""))))
            bad = {}
            for d, lo in (("M", 16), ("N", 16), ("K", k_lo)):
                v = f.metric[d]
                if v % lo:
                    bad[v] = max(bad.get(v, 0), lo)
            if not bad:
                continue
            consts = constexpr_names(fn)
            cur = current_launch_values(ctx.spec.source, {f.kernel}, {f.kernel: consts}).get(f.kernel, {})
            for p, v in cur.items():
                if p in consts and v in bad:
                    new = _pow2_up(v, bad[v]) if direction == "up" else _pow2_down(v, bad[v])
                    if new != v:
                        values.setdefault(f.kernel, {})[p] = new
        if not values:
            continue
        src = set_launch_values(ctx.spec.source, values)
        if src == ctx.spec.source or any(p.source == src for p in out):
            continue
        desc = "; ".join(f"{k}: " + ", ".join(f"{p}={v}" for p, v in ps.items()) for k, ps in values.items())
        out.append(Proposal("block_multiple_of_16", src, {"direction": direction, "values": values},
                            f"tl.dot blocks rounded {direction} to powers of two that are multiples of 16: {desc}",
                            [f.id for f in motivating],
                            "no cube padding: every fractal of the tl.dot is full; rounded "
                            + ("up, fewer and larger programs (more UB per program)" if direction == "up" else
                               "down, more and smaller programs")
                            + "; the masks cover the edges (untested on NPU hardware)"))
    return out


# ------------------------------------------------------------------------------------------------
# ub_retile
# ------------------------------------------------------------------------------------------------

def _dims(type_text: str) -> set[int]:
    m = re.search(r"<([^>]*)>", type_text or "")
    return {int(x) for x in re.findall(r"(\d+)x", m.group(1))} if m else set()


@rewrite("ub_retile", "Ascend: shrink a block constexpr so the tile buffers fit the unified buffer", priority=20)
def ub_retile(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("ub_retile")
    if not motivating:
        return []
    module = parse(ctx.spec.source)
    kernels = jit_functions(module)
    plans: dict[str, tuple[str, int, float]] = {}   # kernel -> (param, value, need / capacity)
    for f in motivating:
        fn = kernels.get(f.kernel)
        cap = f.metric.get("ub_capacity_bytes") or 0
        need = f.metric.get("ub_estimate_bytes") if f.detector == "ascend_ub_overflow" else \
            f.metric.get("double_buffered_bytes")
        if fn is None or not cap or not need or need <= cap:
            continue   # nothing to fit (the detector fires only above the capacity)
        consts = constexpr_names(fn)
        cur = {p: v for p, v in current_launch_values(ctx.spec.source, {f.kernel}, {f.kernel: consts})
               .get(f.kernel, {}).items() if p in consts and v > 1}
        if not cur:
            continue
        dims = _dims(str(f.metric.get("largest_buffer_type", "")))
        pick = [p for p in cur if cur[p] in dims] or [p for p in cur if "BLOCK" in p.upper()]
        if not pick:
            continue
        param = max(pick, key=lambda p: cur[p])
        ratio = need / cap
        if f.kernel not in plans or ratio > plans[f.kernel][2]:
            plans[f.kernel] = (param, cur[param], ratio)
    out = []
    for extra in (1, 2):
        values = {}
        for k, (param, v, ratio) in plans.items():
            factor = 1
            while ratio / factor > 1:
                factor *= 2
            factor *= extra
            if factor > 1 and v % factor == 0 and v // factor >= 1:
                values[k] = {param: v // factor}
        if not values:
            continue
        src = set_launch_values(ctx.spec.source, values)
        if src == ctx.spec.source or any(p.source == src for p in out):
            continue
        desc = "; ".join(f"{k}: {p}={v}" for k, ps in values.items() for p, v in ps.items())
        out.append(Proposal("ub_retile", src, {"values": values, "headroom": extra},
                            f"block shrunk to fit the unified buffer{' with 2x headroom' if extra > 1 else ''}: {desc}",
                            [f.id for f in motivating],
                            "the tiles fit the UB: no compile failure or spill, and room for the double buffering "
                            "that overlaps DMA with compute; more programs of smaller tiles (untested on NPU hardware)"))
    return out


# ------------------------------------------------------------------------------------------------
# split_blocks_for_cores
# ------------------------------------------------------------------------------------------------

#: smallest block a split may leave: 256 elements for vector kernels (below that the per-program set-up
#: outweighs the tile), 16 for a tl.dot block dimension (one cube fractal)
SPLIT_FLOOR, SPLIT_FLOOR_DOT = 256, 16


def _cdiv_divisor(grid: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The divisor of a 1-D grid ``(triton.cdiv(n, D),)`` or ``lambda meta: (triton.cdiv(n, meta["D"]),)``."""
    if isinstance(grid, cst.Lambda):
        grid = grid.body
    if not isinstance(grid, cst.Tuple) or len(grid.elements) != 1:
        return None
    e = grid.elements[0].value
    if not (isinstance(e, cst.Call) and dotted(e.func) in ("triton.cdiv", "cdiv") and len(e.args) == 2):
        return None
    return e.args[1].value


def _multiplied_by(fn: cst.FunctionDef, name: str) -> bool:
    """The kernel scales something by ``name`` (``pid * BLOCK``): the block is the program's stride."""
    found = []

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Multiply) and any(
                    isinstance(x, cst.Name) and x.value == name for x in (node.left, node.right)):
                found.append(node)

    fn.visit(V())
    return bool(found)


def split_plan(source: str, kernel: str) -> tuple[str, int, str] | str:
    """(block constexpr, its launcher value, "name" | "literal") for a kernel launched once over
    ``(triton.cdiv(n, BLOCK),)`` with BLOCK a power-of-two constexpr set in the launcher, whose loads and
    stores are all masked and whose program offset is ``pid * BLOCK``; else the reason it does not apply
    (a row-wise kernel, one program per row, is launched over ``(M,)`` and says so)."""
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None:
        return "kernel not found"
    sites = [s for s in launch_sites(module) if s.kernel == kernel]
    if len(sites) != 1:
        return f"{len(sites)} launches of the kernel (one expected)"
    site = sites[0]
    div = _cdiv_divisor(site.grid)
    consts = constexpr_names(fn)
    if div is None:
        return "grid is not (triton.cdiv(n, BLOCK),): a row-wise kernel (one program per row) or a fixed grid; " \
               "splitting its block does not add programs"
    launch = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "launch")
    param = kind = None
    value = None
    for p in consts:
        arg = site.bound.get(p)
        if isinstance(div, cst.Subscript):   # lambda meta: ... meta["BLOCK"]
            key = div.slice[0].slice.value if len(div.slice) == 1 and isinstance(div.slice[0].slice, cst.Index) \
                else None
            if not (isinstance(key, cst.SimpleString) and key.evaluated_value == p):
                continue
        elif isinstance(div, cst.Name):
            if not (isinstance(arg, cst.Name) and arg.value == div.value):
                continue
        elif isinstance(div, cst.Integer):
            if not (isinstance(arg, cst.Integer) and int_value(arg) == int_value(div)):
                continue
        else:
            continue
        if isinstance(arg, cst.Integer):
            param, value, kind = p, int_value(arg), "literal"
        elif isinstance(arg, cst.Name):
            vals = local_assignment(launch, arg.value)
            if len(vals) == 1 and isinstance(vals[0], cst.Integer):
                param, value, kind = p, int_value(vals[0]), "name"
        break
    if param is None or value is None:
        return "the grid's divisor is not a constexpr of the kernel set to an int in the launcher"
    if value & (value - 1):
        return f"{param}={value} is not a power of two"
    if not _all_masked(fn):
        return "not every load and store is masked: a smaller block would not cover the edges safely"
    if not _multiplied_by(fn, param):
        return f"the kernel does not offset its programs by pid * {param}"
    return param, value, kind


def _set_block(source: str, kernel: str, param: str, new: int) -> str:
    """The launch's block set to ``new``: launch_config's ``apply_config`` hoists a literal block tied to
    its grid into a launcher local first, so the keyword and the grid's cdiv divisor change together."""
    return apply_config(source, {kernel: {param: new}})


@rewrite("split_blocks_for_cores", "Ascend: a smaller block so a 1-D cdiv grid has a program for every core",
         priority=38)
def split_blocks_for_cores(ctx: RewriteContext) -> list[Proposal]:
    motivating = [f for f in ctx.motivating("split_blocks_for_cores") if f.detector == "ascend_too_few_programs"]
    if not motivating:
        return []
    kernels = jit_functions(parse(ctx.spec.source))
    plans = {}   # kernel -> (param, value, kind, programs, cores, core kind, floor)
    for f in motivating:
        n, cores = f.metric.get("num_programs"), f.metric.get("cores")
        if f.kernel not in kernels or not isinstance(n, int) or not isinstance(cores, int) or not 0 < n < cores:
            continue
        plan = split_plan(ctx.spec.source, f.kernel)
        if isinstance(plan, str):
            continue
        cube = calls_named(kernels[f.kernel], "tl.dot") or not str(f.metric.get("mix_mode", "aiv")).startswith("aiv")
        plans[f.kernel] = (*plan, n, cores, f.metric.get("core_kind", "vector"),
                           SPLIT_FLOOR_DOT if cube else SPLIT_FLOOR)
    out: list[Proposal] = []
    for extra in (1, 2):
        src, values, desc = ctx.spec.source, {}, []
        for k, (param, v, kind, n, cores, core_kind, floor) in plans.items():
            factor = 1
            while n * factor < cores * extra:
                factor *= 2
            new = max(v // factor, min(floor, v))
            if new >= v:
                continue
            src = _set_block(src, k, param, new)
            values[k] = {param: new}
            desc.append(f"{k}: {param} {v} -> {new}, about {n * v // new} programs for {cores} {core_kind} cores "
                        f"(was {n})" + (f"; floor {floor} reached" if new == floor and v // factor < floor else ""))
        if not values or src == ctx.spec.source or any(p.source == src for p in out):
            continue
        out.append(Proposal("split_blocks_for_cores", src, {"values": values, "programs_per_core": extra},
                            "block split so every core gets a program"
                            + (" (2x the cores: two programs per core)" if extra > 1 else "") + ": " + "; ".join(desc),
                            [f.id for f in motivating],
                            "idle cores get work: the launch spreads over all the cores instead of a few, up to "
                            "cores / programs times the throughput of a bandwidth-bound kernel, against more "
                            "per-program start-up for the smaller tiles; the masks cover the edges (untested on NPU "
                            "hardware)"))
    return out
