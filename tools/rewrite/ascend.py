"""Rewrite families for the Ascend NPU findings (``tools/npu/detectors.py``).

- ``grid_fold_to_cores`` (ascend_grid_over_65535, ascend_grid_exceeds_cores): the persistent-programs
  rewrite of ``persistent.py`` with the NPU's AI-core count instead of SMs: the launcher launches
  ``min(tiles, cores)`` programs, each looping over ``range(tl.program_id(0), NUM_TILES, NUM_PROGS)``.
  The core count is read at launch time from triton-ascend's driver (``num_vectorcore`` for vector
  kernels, ``num_aicore`` for kernels with ``tl.dot``, which run on the AI/cube cores), as the
  capture's stand-in driver also answers from the target table; 4 where no NPU driver answers (the
  Triton interpreter), so the loop is exercised there. ascend_too_few_programs also suggests this
  family, but folding cannot add programs: those findings get nothing from it.
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
    current_launch_values,
    dotted,
    jit_functions,
    kwarg,
    parse,
    set_launch_values,
    with_args,
)
from tritondx.tools.rewrite.index_width import index_source
from tritondx.tools.rewrite.persistent import persistent_source

#: the families of this module (CUDA showcases and suite coverage leave them out: their findings come only
#: from the Ascend detectors; tests/cpu/npu/test_ascend_rewrites.py covers them)
ASCEND_FAMILIES = ("grid_fold_to_cores", "remove_gpu_launch_settings", "int32_indices", "block_multiple_of_16",
                   "ub_retile")

NPU_CORES_HELPER = '''
def _tdx_npu_cores(t, cube=False):
    """AI cores one launch can fill on the NPU: the cube (AI) cores for kernels using tl.dot, the vector
    cores otherwise, as triton-ascend's driver reports them; 4 where no NPU driver answers (e.g. the Triton
    interpreter), so the per-program loop still runs there."""
    try:
        drv = triton.runtime.driver.active
        props = drv.utils.get_device_properties(drv.get_current_device())
        return int(props["num_aicore" if cube else "num_vectorcore"])
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
        return f"_tdx_npu_cores({tensor}{', cube=True' if kernel in cube else ''})"

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
