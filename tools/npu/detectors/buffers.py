"""Ascend detectors of the unified buffer (UB): tile buffers that do not fit it, and loop tiles too large to
double-buffer; estimated from the adapter IR's local buffers and tile temporaries."""

from __future__ import annotations

from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.npu.adapter_ir import IRModule, Op, ShapedType
from tritondx.tools.npu.kernel import KernelContext
from tritondx.tools.records.evidence import Finding


def _ub_estimate(ir: IRModule) -> dict:
    """Rough UB need of the kernel body: every local buffer (``memref.alloc``: the UB copy of a
    load) plus the largest tile value computed from them (one live temporary)."""
    allocs: list[tuple[Op, ShapedType]] = []
    for op in ir.find("memref.alloc"):
        ts = op.memref_types()
        if ts and ts[0].bytes is not None:
            allocs.append((op, ts[0]))
    temps: list[tuple[Op, ShapedType]] = []
    for op in ir.ops:
        if op.name in ("memref.alloc", "bufferization.to_tensor", "memref.reinterpret_cast", "memref.subview",
                       "tensor.extract_slice", "bufferization.materialize_in_destination"):
            continue
        ts = [t for t in op.tensor_types() if t.bytes is not None]
        if op.results and ts:
            temps.append((op, max(ts, key=lambda t: t.bytes)))
    alloc_bytes = sum(t.bytes for _, t in allocs)
    biggest_temp = max(temps, key=lambda x: x[1].bytes, default=(None, None))
    biggest_alloc = max(allocs, key=lambda x: x[1].bytes, default=(None, None))
    temp_bytes = biggest_temp[1].bytes if biggest_temp[1] is not None else 0
    candidates = [x for x in (biggest_alloc, biggest_temp) if x[1] is not None]
    largest = max(candidates, key=lambda x: x[1].bytes, default=(None, None))
    loads_in_loops = [op for op, _ in allocs if ir.enclosing_loops(op)]
    return {"alloc_bytes": alloc_bytes, "temp_bytes": temp_bytes, "estimate": alloc_bytes + temp_bytes,
            "largest_op": largest[0], "largest_type": largest[1], "allocs": len(allocs),
            "loop_alloc_bytes": sum(t.bytes for op, t in allocs if op in loads_in_loops),
            "loads_in_loops": len(loads_in_loops)}


@detector("ascend_ub_overflow", "compiler", ("ttadapter",), ("ub_retile",),
          "tile buffers exceed the unified buffer", targets=("ascend",))
def ub_overflow(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Tile buffers that do not fit the unified buffer (UB) of one vector core: 192 KB on A2/A3,
    248 KB on 950 (sources in ``targets.py``). Estimated from the adapter IR: the sum of the local
    buffers (``memref.alloc``) plus the largest tile temporary."""
    est = _ub_estimate(ctx.adapter)
    cap = ctx.target.ub_bytes
    if est["estimate"] <= cap:
        return []
    largest = est["largest_type"]
    certain = largest is not None and largest.bytes > cap
    return [det.finding(
        ctx, f"estimated UB need {est['estimate'] // 1024} KB > {cap // 1024} KB UB of a {ctx.target.arch} "
             f"vector core (largest buffer {largest} = {largest.bytes // 1024 if largest else 0} KB); "
             f"the compile fails with a UB overflow or spills",
        op=est["largest_op"], severity="high" if certain else "medium",
        metric={"ub_estimate_bytes": est["estimate"], "ub_capacity_bytes": cap,
                "largest_buffer_bytes": largest.bytes if largest else 0, "local_buffers": est["allocs"],
                "largest_buffer_type": str(largest) if largest else ""})]


@detector("ascend_multibuffer_headroom", "compiler", ("ttadapter",), ("ub_retile", "multibuffer_hint"),
          "loop tiles too large to double-buffer", targets=("ascend",))
def multibuffer_headroom(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Loads inside a loop whose buffers fit the UB once but not twice: the double buffering
    (``multibuffer``, on by default for A2/A3) that overlaps the next tile's DMA with this tile's
    compute cannot be applied. triton-ascend's guidance keeps one iteration under half the UB."""
    est = _ub_estimate(ctx.adapter)
    cap = ctx.target.ub_bytes
    if not est["loads_in_loops"] or est["estimate"] > cap:
        return []  # no pipelined loads, or plain overflow (UBOverflow reports it)
    doubled = est["estimate"] + est["loop_alloc_bytes"]
    if doubled <= cap:
        return []
    loop_allocs = [o for o in ctx.adapter.find("memref.alloc") if ctx.adapter.enclosing_loops(o)]
    default_on = not ctx.target.compile_on_910_95  # multibuffer defaults to off on the 950 path
    return [det.finding(
        ctx, f"loop tiles need {est['estimate'] // 1024} KB of UB; double-buffering the "
             f"{est['loop_alloc_bytes'] // 1024} KB of loaded tiles needs {doubled // 1024} KB > "
             f"{cap // 1024} KB, so DMA and compute cannot overlap"
             + ("" if default_on else " (multibuffer is off by default on this target)"),
        op=loop_allocs[0], severity="medium" if default_on else "low",
        metric={"ub_estimate_bytes": est["estimate"], "double_buffered_bytes": doubled,
                "ub_capacity_bytes": cap, "loop_loaded_bytes": est["loop_alloc_bytes"]})]
