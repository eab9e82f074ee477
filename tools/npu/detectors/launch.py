"""Ascend detectors of the launch and the cube: grid size against the launcher's limit and the core count,
GPU-only launch settings, and ``tl.dot`` tiles that do not fit the cube fractal."""

from __future__ import annotations

from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.npu.kernel import KernelContext
from tritondx.tools.npu.targets import MAX_GRID
from tritondx.tools.records.evidence import Finding

#: num_warps the ascend backend assumes when none is given (NPUOptions.num_warps); it has no effect
#: on the code generated for A2/A3/950 SIMD kernels.
DEFAULT_NUM_WARPS = 4


@detector("ascend_grid_over_65535", "ir", ("ttir",), ("grid_fold_to_cores",),
          "grid larger than 65535 programs", targets=("ascend",))
def grid_over_limit(det: Detector, ctx: KernelContext) -> list[Finding]:
    """More than 65535 programs: triton-ascend 3.2 refuses the launch ("grid should be less than
    65536!") unless ``TRITON_ALL_BLOCKS_PARALLEL=1``; far more programs than cores means many waves
    of core start-up anyway."""
    n = ctx.num_programs
    if n <= MAX_GRID:
        return []
    pid = ctx.ttir.find("tt.get_program_id")
    return [det.finding(
        ctx, f"grid {tuple(ctx.grid)} = {n} programs > {MAX_GRID}: the triton-ascend launcher raises "
             f"unless TRITON_ALL_BLOCKS_PARALLEL=1; fold the grid onto the cores and loop inside",
        op=pid[0] if pid else None, line=ctx.launch_line(), severity="high",
        metric={"num_programs": n, "grid": "x".join(map(str, ctx.grid)), "limit": MAX_GRID})]


@detector("ascend_dot_block_not_multiple_of_16", "ir", ("ttir",), ("block_multiple_of_16",),
          "tl.dot tile dims not multiples of 16", targets=("ascend",))
def dot_block_not_multiple_of_16(det: Detector, ctx: KernelContext) -> list[Finding]:
    """``tl.dot`` tiles whose M or N is not a multiple of 16, or whose K is not a multiple of the
    fractal depth (16 for fp16/bf16, 8 for fp32, 32 for int8: 32 bytes): the cube unit works on
    16 x 32-byte fractals, so the operands are padded and part of every cube op is wasted."""
    out = []
    for op in ctx.ttir.find("tt.dot"):
        ts = op.tensor_types()
        if len(ts) < 2 or len(ts[0].shape) < 2 or len(ts[1].shape) < 2:
            continue
        a, b = ts[0], ts[1]
        m, k = a.shape[-2], a.shape[-1]
        n = b.shape[-1]
        if None in (m, n, k):
            continue
        # cube fractals are 16 x (32 bytes): K aligns to 16 for fp16/bf16, 8 for fp32, 32 for int8
        k_align = max(8, 32 // a.element_bytes)
        bad = {d: v for d, v, al in (("M", m, 16), ("N", n, 16), ("K", k, k_align)) if v % al}
        if not bad:
            continue
        waste = 1 - (m * n * k) / (_ceil(m, 16) * _ceil(n, 16) * _ceil(k, k_align))
        out.append(det.finding(
            ctx, f"tl.dot tile M={m} N={n} K={k} ({a.element}): "
                 f"{', '.join(f'{d}={v}' for d, v in bad.items())} not aligned to the cube fractal "
                 f"(16 for M/N, {k_align} for K with {a.element}); operands are padded "
                 f"({waste:.0%} of the padded cube work wasted)",
            op=op, severity="medium",
            metric={"M": m, "N": n, "K": k, "dtype": a.element, "padded_waste": round(waste, 3)}))
    return out


def _ceil(v: int, a: int) -> int:
    return -(-v // a) * a


@detector("ascend_gpu_launch_settings", "ir", ("ttir",), ("remove_gpu_launch_settings",),
          "GPU-only launch settings", targets=("ascend",))
def gpu_launch_settings(det: Detector, ctx: KernelContext) -> list[Finding]:
    """GPU launch settings passed at the launch (``num_warps`` other than the default, ``num_stages``
    above 2, ``num_ctas``, ``maxnreg``): the Ascend SIMD path ignores them, so they are noise at best
    and mislead tuning (the Ascend knobs are the tile sizes, the grid and ``multibuffer``)."""
    found = {}
    if ctx.num_warps_explicit and ctx.num_warps not in (None, DEFAULT_NUM_WARPS):
        found["num_warps"] = ctx.num_warps
    if ctx.num_stages is not None and ctx.num_stages > 2:
        found["num_stages"] = ctx.num_stages
    if ctx.launch_options.get("num_ctas") not in (None, 1):
        found["num_ctas"] = ctx.launch_options["num_ctas"]
    if ctx.launch_options.get("maxnreg") is not None:
        found["maxnreg"] = ctx.launch_options["maxnreg"]
    if not found:
        return []
    keyword = next(iter(found))
    return [det.finding(
        ctx, f"GPU launch setting(s) {', '.join(f'{k}={v}' for k, v in found.items())} have no effect on "
             f"Ascend (the SIMD path does not use warps or GPU software pipelining)",
        line=ctx.launch_line(keyword), severity="low",
        metric={k: v for k, v in found.items()} | {"default_num_warps": DEFAULT_NUM_WARPS})]


def _mix_mode(ctx: KernelContext) -> str:
    """The adapter's ``mix_mode`` ("aiv" = vector only, "aic"/"mix" = uses the cube); when the
    adapter stage is missing, guess from the TTIR: a ``tt.dot`` means the cube is used."""
    if ctx.adapter is not None and ctx.adapter.mix_mode:
        return ctx.adapter.mix_mode
    if ctx.ttir is not None and ctx.ttir.find("tt.dot"):
        return "mix"
    return "aiv"


@detector("ascend_too_few_programs", "ir", (), ("split_blocks_for_cores",),
          "fewer programs than cores", targets=("ascend",), cites="ttadapter")
def too_few_programs(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Fewer programs than the physical cores the kernel runs on (vector cores for ``mix_mode="aiv"``
    kernels, AI cores otherwise): the remaining cores stay idle for the whole launch."""
    if ctx.adapter is None and ctx.ttir is None:
        return []
    mix = _mix_mode(ctx)
    cores = ctx.target.cores_for(mix)
    n = ctx.num_programs
    if n >= cores:
        return []
    kind = "vector" if mix.startswith("aiv") else "AI (cube)"
    return [det.finding(
        ctx, f"{n} program(s) for {cores} {kind} cores of {ctx.target.arch}: {cores - n} cores idle "
             f"({n / cores:.0%} used); split the work so every core gets a share",
        line=ctx.launch_line(), severity="medium" if n * 2 <= cores else "low",
        metric={"num_programs": n, "cores": cores, "core_kind": kind, "mix_mode": mix,
                "grid": "x".join(map(str, ctx.grid)), "utilization": round(n / cores, 3)})]


#: fewer waves than this is no finding
MIN_WAVES = 4


@detector("ascend_grid_exceeds_cores", "ir", (), ("grid_fold_to_cores",),
          "grid much larger than the core count", targets=("ascend",), cites="ttadapter")
def many_waves(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Many more programs than cores: each program is one task on one core, so the launch runs in
    ``ceil(programs / cores)`` waves and pays core start-up and scalar set-up per program.
    triton-ascend's guide recommends a grid equal to the physical core count with a loop inside."""
    if ctx.adapter is None and ctx.ttir is None:
        return []
    mix = _mix_mode(ctx)
    cores = ctx.target.cores_for(mix)
    n = ctx.num_programs
    waves = -(-n // cores)
    if waves < MIN_WAVES or n > MAX_GRID:
        return []
    return [det.finding(
        ctx, f"{n} programs on {cores} cores = {waves} waves of short tasks; a grid of {cores} programs "
             f"looping over the work avoids the per-program start-up",
        line=ctx.launch_line(), severity="medium" if waves >= 16 else "low",
        metric={"num_programs": n, "cores": cores, "waves": waves, "mix_mode": mix})]
