"""Ascend detectors of how a kernel reaches global memory, read from the adapter IR (what triton-to-unstructure
made of an access: scalar loops, per-row loops, masks and branches inside loops) and from TTIR (int64 index math)."""

from __future__ import annotations

import re
from typing import Sequence

from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.npu.adapter_ir import REINTERPRET_SIZES_RE, IRModule, Op, tensor_types
from tritondx.tools.npu.kernel import KernelContext
from tritondx.tools.records.evidence import Finding

LOOP_OPS = ("scf.for", "scf.while")
INT_ARITH_OPS = ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi",
                 "arith.remui", "arith.cmpi", "arith.maxsi", "arith.minsi", "arith.extsi", "arith.extui",
                 "arith.floordivsi", "arith.ceildivsi", "arith.shli", "arith.shrsi", "arith.andi", "arith.ori")


def _sizes_of_reinterpret(op: Op) -> list[int | None]:
    m = REINTERPRET_SIZES_RE.search(op.text)
    if not m:
        return []
    return [int(s) if s.strip().lstrip("-").isdigit() else None for s in m.group(1).split(",") if s.strip()]


def _prod(values: Sequence[int | None]) -> int | None:
    out = 1
    for v in values:
        if v is None:
            return None
        out *= v
    return out


def _loop_label(ir: IRModule, loop: Op) -> str:
    tc = ir.trip_count(loop)
    return f"{tc} iterations" if tc is not None else "a dynamic trip count"


def _gm_transfers(ir: IRModule, ops: Sequence[Op]) -> list[Op]:
    """memref.reinterpret_cast of a kernel argument = a GM window that is loaded or stored."""
    return [o for o in ops if o.name == "memref.reinterpret_cast" and re.search(r"reinterpret_cast\s+%arg\d+", o.text)]


@detector("ascend_discrete_scalar_loop", "compiler", ("ttadapter",), ("contiguous_retile", "int32_indices"),
          "gather/scatter lowered to a scalar loop with DiscreteMemAccess", targets=("ascend",))
def discrete_scalar_loop(det: Detector, ctx: KernelContext) -> list[Finding]:
    """A gather/scatter (``tl.load(ptr + idx)`` with loaded indices) that triton-to-unstructure
    lowered to a scalar ``scf.for`` over every element: ``tensor.extract ... {DiscreteMemAccess}``
    feeding a 1-element GM access per iteration. The vector unit is idle; each element costs a
    scalar address computation and a scalar load/store."""
    ir = ctx.adapter
    out = []
    for loop in ir.find(*LOOP_OPS):
        body = ir.descendants(loop)
        discrete = [o for o in body if "DiscreteMemAccess" in o.attrs and o.name == "tensor.extract"]
        if not discrete:
            continue
        windows = _gm_transfers(ir, body)
        scalar = [w for w in windows if _prod(_sizes_of_reinterpret(w)) == 1]
        if not scalar or len(scalar) < len(windows):
            continue  # a row per iteration: reported by UnstructuredAccess
        stores = any(o.name in ("memref.store", "bufferization.materialize_in_destination") for o in body)
        loads = any(o.name == "memref.load" or (o.name == "memref.copy" and "%reinterpret_cast" in o.text)
                    for o in body)
        kind = "load/store" if (stores and loads) else "store" if stores else "load"
        elems = ir.trip_count(loop)
        out.append(det.finding(
            ctx, f"indirect {kind} lowered to a scalar loop over {_loop_label(ir, loop)}: one scalar GM "
                 f"{kind} per element (tensor.extract {{DiscreteMemAccess}}) instead of a vector DMA",
            op=loop, severity="high",
            metric={"elements": elems if elems is not None else -1, "elements_per_iteration": 1,
                    "access": kind, "discrete_ops": len(discrete)}))
    return out


@detector("ascend_unstructured_access", "compiler", ("ttadapter",), ("contiguous_retile",),
          "unstructured access split into a per-row loop by triton-to-unstructure", targets=("ascend",))
def unstructured_access(det: Detector, ctx: KernelContext) -> list[Finding]:
    """triton-to-unstructure split an access whose offsets are not affine in the program/range ids
    into a loop (``{ExtractedLoadOrStore}``) that moves one row per iteration: the structured inner
    dimension is still a DMA, but the outer one became a scalar loop of small transfers."""
    ir = ctx.adapter
    out = []
    for loop in ir.find(*LOOP_OPS):
        if "ExtractedLoadOrStore" not in loop.attrs:
            continue
        body = ir.descendants(loop)
        windows = _gm_transfers(ir, body)
        rows = [w for w in windows if (_prod(_sizes_of_reinterpret(w)) or 2) > 1]
        if not rows:
            continue
        sizes = _sizes_of_reinterpret(rows[0])
        row_elems = _prod(sizes)
        iters = ir.trip_count(loop)
        out.append(det.finding(
            ctx, f"unstructured access split into a loop of {_loop_label(ir, loop)}, each moving one "
                 f"{'x'.join(str(s) for s in sizes)} block (ExtractedLoadOrStore); the offsets are not "
                 f"an affine function of the block ranges",
            op=loop, severity="medium",
            metric={"iterations": iters if iters is not None else -1,
                    "elements_per_iteration": row_elems if row_elems is not None else -1,
                    "parallel_loop": "hivm.parallel_loop" in loop.attrs}))
    return out


@detector("ascend_mask_in_loop", "compiler", ("ttadapter",), ("mask_removal",),
          "mask lowered to padding copies / selects on every loop iteration", targets=("ascend",))
def mask_in_loop(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Masked loads/stores inside a loop: every iteration recomputes the mask bounds
    (maxsi/minsi/subi), moves a dynamically sized block and guards a padding ``linalg.fill`` (the
    ``other=`` value) with an ``scf.if {hivm.unlikely_condition}``; masks the adapter cannot turn
    into bounds become full-tile ``arith.select``."""
    ir = ctx.adapter
    out = []
    for loop in ir.find(*LOOP_OPS):
        if "ExtractedLoadOrStore" in loop.attrs:
            continue
        body = [o for o in ir.descendants(loop)
                if not any(a.name in LOOP_OPS for a in ir.ancestors(o) if a.index > loop.index)]
        pads = [o for o in body if o.name == "scf.if" and "hivm.unlikely_condition" in o.attrs
                and any(d.name == "linalg.fill" for d in ir.descendants(o))]
        selects = [o for o in body if o.name == "arith.select" and o.tensor_types()
                   and "DiscreteMemAccess" not in o.attrs]
        dyn_stores = [o for o in body if o.name == "tensor.extract_slice" and "[%" in o.text
                      and "tensor<?" in o.text]
        if not (pads or selects or dyn_stores):
            continue
        first = (pads or selects or dyn_stores)[0]
        tile = max((t.numel or 0 for o in body for t in o.tensor_types()), default=0)
        iters = ir.trip_count(loop)
        parts = []
        if pads:
            parts.append(f"{len(pads)} masked load(s) with a padding fill")
        if dyn_stores:
            parts.append(f"{len(dyn_stores)} masked store(s) of a dynamic-size slice")
        if selects:
            parts.append(f"{len(selects)} full-tile select(s)")
        out.append(det.finding(
            ctx, f"mask handled inside a loop of {_loop_label(ir, loop)}: {', '.join(parts)} on every "
                 f"iteration; only the last tile needs it",
            op=first, severity="medium" if (selects or len(pads) + len(dyn_stores) > 1) else "low",
            metric={"padded_loads": len(pads), "masked_stores": len(dyn_stores), "selects": len(selects),
                    "iterations": iters if iters is not None else -1, "tile_elements": tile}))
    return out


@detector("ascend_branch_in_loop", "compiler", ("ttadapter",), ("mask_removal", "multibuffer_hint"),
          "if inside a loop around tile work", targets=("ascend",))
def branch_in_loop(det: Detector, ctx: KernelContext) -> list[Finding]:
    """A scalar ``if`` inside a loop whose arms compute whole tiles (``scf.if ... -> (tensor<...>)``):
    the tile work is split at every iteration, which keeps the compiler from pipelining the loop
    (multibuffer) and, when the branch is flattened, makes both arms run as masked work."""
    ir = ctx.adapter
    out = []
    for op in ir.find("scf.if"):
        loops = ir.enclosing_loops(op)
        if "hivm.unlikely_condition" in op.attrs or not loops:
            continue
        if any("ExtractedLoadOrStore" in lp.attrs for lp in loops):
            continue  # the per-element guard of a scalarised gather/scatter (DiscreteScalarLoop)
        yields_tiles = any((t.numel or 2) > 1 for t in tensor_types(op.text.split("->", 1)[-1])) \
            if "->" in op.text else False
        inner = [d for d in ir.descendants(op) if d.name != "scf.yield"
                 and any((t.numel or 2) > 1 for t in d.tensor_types())]
        if not (yields_tiles or inner):
            continue
        loop = ir.enclosing_loops(op)[0]
        out.append(det.finding(
            ctx, f"branch inside a loop of {_loop_label(ir, loop)} guards {len(inner)} tile op(s); "
                 f"its arms become masked/duplicated tile work and block loop pipelining",
            op=op, severity="medium",
            metric={"tile_ops_in_branch": len(inner), "yields_tiles": yields_tiles,
                    "has_else": bool(op.close_text and "else" in op.close_text)}))
    return out


def _i64_ops(ir: IRModule) -> list[Op]:
    hits = []
    for op in ir.find(*INT_ARITH_OPS):
        types = op.tensor_types()
        if op.name in ("arith.extsi", "arith.extui"):
            types = types[-1:]
        if any(t.element == "i64" for t in types):
            hits.append(op)
    return hits


@detector("ascend_int64_index_math", "ir", ("ttir",), ("int32_indices",),
          "int64 vector index arithmetic", targets=("ascend",))
def int64_index_math(det: Detector, ctx: KernelContext) -> list[Finding]:
    """Index arithmetic on ``tensor<...xi64>`` in TTIR (``pid.to(tl.int64)``, int64 offsets or loaded
    int64 indices scaled by strides). The Ascend vector unit has no native 64-bit integer lanes; when
    the adapter cannot fold the math into a structured pointer it stays as emulated i64 vector ops."""
    hits = _i64_ops(ctx.ttir)
    if not hits:
        return []
    survive = _i64_ops(ctx.adapter) if ctx.adapter is not None else []
    lines = sorted({ctx.ttir.source_line(o) for o in hits} - {None})
    return [det.finding(
        ctx, f"{len(hits)} int64 vector index op(s) in TTIR"
             + (f"; {len(survive)} still int64 vector ops after the adapter" if survive else
                "; the adapter folded them into pointer offsets this time"),
        op=hits[0], severity="medium" if survive else "low",
        metric={"i64_tensor_ops": len(hits), "i64_ops_after_adapter": len(survive),
                "source_lines": ",".join(map(str, lines[:8]))})]
