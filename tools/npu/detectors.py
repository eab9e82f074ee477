"""Ascend detectors: read the TTIR and the adapter IR of a captured kernel and report findings.

Each detector is a small class with an ``id``, a ``tier`` ("ir" for facts visible in the Triton
program itself, "compiler" for what triton-ascend's adapter made of it), the ``stage`` it reads
("ttir" or "ttadapter"), and the rewrite families it ``suggests``. ``detect(ctx)`` returns
:class:`tritondx.tools.records.evidence.Finding` objects carrying the evidence: the IR line, the task
source line it maps to, and the metric.

Entry points:

- :func:`run_detectors` -- every distinct kernel of an :class:`~tritondx.tools.npu.capture.AscendCapture`;
- :func:`analyze_kernel` -- one kernel from IR text (what the tests use on inline IR).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from tritondx.tools.records.evidence import Finding, Severity, finding_id
from tritondx.tools.npu.adapter_ir import (
    REINTERPRET_SIZES_RE,
    IRModule,
    Op,
    ShapedType,
    parse_adapter_ir,
    parse_ttir,
    tensor_types,
)
from tritondx.tools.npu.targets import MAX_GRID, AscendTarget, resolve_target

if TYPE_CHECKING:
    from tritondx.tools.npu.capture import AscendCapture, KernelCapture

#: num_warps the ascend backend assumes when none is given (NPUOptions.num_warps); it has no effect
#: on the code generated for A2/A3/950 SIMD kernels.
DEFAULT_NUM_WARPS = 4
LOOP_OPS = ("scf.for", "scf.while")
INT_ARITH_OPS = ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi",
                 "arith.remui", "arith.cmpi", "arith.maxsi", "arith.minsi", "arith.extsi", "arith.extui",
                 "arith.floordivsi", "arith.ceildivsi", "arith.shli", "arith.shrsi", "arith.andi", "arith.ori")


@dataclass
class KernelContext:
    """Everything a detector may read about one compiled kernel."""

    kernel: str
    target: AscendTarget
    ttir: IRModule | None = None
    adapter: IRModule | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    num_warps: int | None = None
    num_warps_explicit: bool = False
    num_stages: int | None = None
    launch_options: dict[str, Any] = field(default_factory=dict)
    source_file: str | None = None
    source_lines: list[str] | None = None

    @property
    def num_programs(self) -> int:
        g = self.grid
        return int(g[0]) * int(g[1]) * int(g[2])

    def ir(self, stage: str) -> IRModule | None:
        return self.ttir if stage == "ttir" else self.adapter

    def source_text(self, line: int | None) -> str | None:
        if line is None or not self.source_lines or not (1 <= line <= len(self.source_lines)):
            return None
        return self.source_lines[line - 1].strip()

    def launch_line(self, must_contain: str | None = None) -> int | None:
        """Line of the task source that launches this kernel (``kernel[grid](``)."""
        if not self.source_lines:
            return None
        pat = re.compile(rf"\b{re.escape(self.kernel)}\s*\[")
        hits = [i for i, ln in enumerate(self.source_lines, 1) if pat.search(ln)]
        if must_contain:
            for i in hits:  # the call may span lines: look a few lines on for the keyword
                block = " ".join(self.source_lines[i - 1:i + 4])
                if must_contain in block:
                    for j in range(i, min(i + 5, len(self.source_lines) + 1)):
                        if must_contain in self.source_lines[j - 1]:
                            return j
        return hits[0] if hits else None


class Detector:
    """Base class: subclasses set the class attributes and implement ``detect``."""

    id: str = ""
    tier: str = "compiler"          # "ir" | "compiler"
    stage: str = "ttadapter"        # "ttir" | "ttadapter"
    suggests: tuple[str, ...] = ()
    summary: str = ""

    def applies(self, ctx: KernelContext) -> bool:
        return ctx.ir(self.stage) is not None

    def detect(self, ctx: KernelContext) -> list[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------------------
    def finding(self, ctx: KernelContext, message: str, *, op: Op | None = None, ir: IRModule | None = None,
                line: int | None = None, metric: dict | None = None, severity: Severity = "medium",
                suggests: Iterable[str] | None = None) -> Finding:
        ir = ir or ctx.ir(self.stage)
        if line is None and op is not None and ir is not None:
            line = ir.source_line(op, ctx.source_file) if ctx.source_file else ir.source_line(op)
        return Finding(
            id=finding_id(self.id, ctx.kernel, line),
            detector=self.id, tier=self.tier, stage=self.stage, kernel=ctx.kernel, severity=severity,
            message=message, source_line=line, source_text=ctx.source_text(line),
            ir_line=op.full_text[:400] if op is not None else None,
            metric=dict(metric or {}), suggests=list(suggests if suggests is not None else self.suggests),
        )


# ------------------------------------------------------------------------------------------------
# helpers on the adapter IR
# ------------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------------
# the detectors
# ------------------------------------------------------------------------------------------------

class DiscreteScalarLoop(Detector):
    """A gather/scatter (``tl.load(ptr + idx)`` with loaded indices) that triton-to-unstructure
    lowered to a scalar ``scf.for`` over every element: ``tensor.extract ... {DiscreteMemAccess}``
    feeding a 1-element GM access per iteration. The vector unit is idle; each element costs a
    scalar address computation and a scalar load/store."""

    id = "ascend_discrete_scalar_loop"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("contiguous_retile", "int32_indices")
    summary = "gather/scatter lowered to a scalar loop with DiscreteMemAccess"

    def detect(self, ctx):
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
            out.append(self.finding(
                ctx, f"indirect {kind} lowered to a scalar loop over {_loop_label(ir, loop)}: one scalar GM "
                     f"{kind} per element (tensor.extract {{DiscreteMemAccess}}) instead of a vector DMA",
                op=loop, severity="high",
                metric={"elements": elems if elems is not None else -1, "elements_per_iteration": 1,
                        "access": kind, "discrete_ops": len(discrete)}))
        return out


class UnstructuredAccess(Detector):
    """triton-to-unstructure split an access whose offsets are not affine in the program/range ids
    into a loop (``{ExtractedLoadOrStore}``) that moves one row per iteration: the structured inner
    dimension is still a DMA, but the outer one became a scalar loop of small transfers."""

    id = "ascend_unstructured_access"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("contiguous_retile",)
    summary = "unstructured access split into a per-row loop by triton-to-unstructure"

    def detect(self, ctx):
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
            out.append(self.finding(
                ctx, f"unstructured access split into a loop of {_loop_label(ir, loop)}, each moving one "
                     f"{'x'.join(str(s) for s in sizes)} block (ExtractedLoadOrStore); the offsets are not "
                     f"an affine function of the block ranges",
                op=loop, severity="medium",
                metric={"iterations": iters if iters is not None else -1,
                        "elements_per_iteration": row_elems if row_elems is not None else -1,
                        "parallel_loop": "hivm.parallel_loop" in loop.attrs}))
        return out


class MaskInLoop(Detector):
    """Masked loads/stores inside a loop: every iteration recomputes the mask bounds
    (maxsi/minsi/subi), moves a dynamically sized block and guards a padding ``linalg.fill`` (the
    ``other=`` value) with an ``scf.if {hivm.unlikely_condition}``; masks the adapter cannot turn
    into bounds become full-tile ``arith.select``."""

    id = "ascend_mask_in_loop"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("mask_removal",)
    summary = "mask lowered to padding copies / selects on every loop iteration"

    def detect(self, ctx):
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
            out.append(self.finding(
                ctx, f"mask handled inside a loop of {_loop_label(ir, loop)}: {', '.join(parts)} on every "
                     f"iteration; only the last tile needs it",
                op=first, severity="medium" if (selects or len(pads) + len(dyn_stores) > 1) else "low",
                metric={"padded_loads": len(pads), "masked_stores": len(dyn_stores), "selects": len(selects),
                        "iterations": iters if iters is not None else -1, "tile_elements": tile}))
        return out


class BranchInLoop(Detector):
    """A scalar ``if`` inside a loop whose arms compute whole tiles (``scf.if ... -> (tensor<...>)``):
    the tile work is split at every iteration, which keeps the compiler from pipelining the loop
    (multibuffer) and, when the branch is flattened, makes both arms run as masked work."""

    id = "ascend_branch_in_loop"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("mask_removal", "multibuffer_hint")
    summary = "if inside a loop around tile work"

    def detect(self, ctx):
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
            out.append(self.finding(
                ctx, f"branch inside a loop of {_loop_label(ir, loop)} guards {len(inner)} tile op(s); "
                     f"its arms become masked/duplicated tile work and block loop pipelining",
                op=op, severity="medium",
                metric={"tile_ops_in_branch": len(inner), "yields_tiles": yields_tiles,
                        "has_else": bool(op.close_text and "else" in op.close_text)}))
        return out


class Int64IndexMath(Detector):
    """Index arithmetic on ``tensor<...xi64>`` in TTIR (``pid.to(tl.int64)``, int64 offsets or loaded
    int64 indices scaled by strides). The Ascend vector unit has no native 64-bit integer lanes; when
    the adapter cannot fold the math into a structured pointer it stays as emulated i64 vector ops."""

    id = "ascend_int64_index_math"
    tier = "ir"
    stage = "ttir"
    suggests = ("int32_indices",)
    summary = "int64 vector index arithmetic"

    @staticmethod
    def _i64_ops(ir: IRModule) -> list[Op]:
        hits = []
        for op in ir.find(*INT_ARITH_OPS):
            types = op.tensor_types()
            if op.name in ("arith.extsi", "arith.extui"):
                types = types[-1:]
            if any(t.element == "i64" for t in types):
                hits.append(op)
        return hits

    def detect(self, ctx):
        hits = self._i64_ops(ctx.ttir)
        if not hits:
            return []
        survive = self._i64_ops(ctx.adapter) if ctx.adapter is not None else []
        lines = sorted({ctx.ttir.source_line(o) for o in hits} - {None})
        return [self.finding(
            ctx, f"{len(hits)} int64 vector index op(s) in TTIR"
                 + (f"; {len(survive)} still int64 vector ops after the adapter" if survive else
                    "; the adapter folded them into pointer offsets this time"),
            op=hits[0], severity="medium" if survive else "low",
            metric={"i64_tensor_ops": len(hits), "i64_ops_after_adapter": len(survive),
                    "source_lines": ",".join(map(str, lines[:8]))})]


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


class UBOverflow(Detector):
    """Tile buffers that do not fit the unified buffer (UB) of one vector core: 192 KB on A2/A3,
    248 KB on 950 (sources in ``targets.py``). Estimated from the adapter IR: the sum of the local
    buffers (``memref.alloc``) plus the largest tile temporary."""

    id = "ascend_ub_overflow"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("ub_retile",)
    summary = "tile buffers exceed the unified buffer"

    def detect(self, ctx):
        est = _ub_estimate(ctx.adapter)
        cap = ctx.target.ub_bytes
        if est["estimate"] <= cap:
            return []
        largest = est["largest_type"]
        certain = largest is not None and largest.bytes > cap
        return [self.finding(
            ctx, f"estimated UB need {est['estimate'] // 1024} KB > {cap // 1024} KB UB of a {ctx.target.arch} "
                 f"vector core (largest buffer {largest} = {largest.bytes // 1024 if largest else 0} KB); "
                 f"the compile fails with a UB overflow or spills",
            op=est["largest_op"], severity="high" if certain else "medium",
            metric={"ub_estimate_bytes": est["estimate"], "ub_capacity_bytes": cap,
                    "largest_buffer_bytes": largest.bytes if largest else 0, "local_buffers": est["allocs"],
                    "largest_buffer_type": str(largest) if largest else ""})]


class MultibufferHeadroom(Detector):
    """Loads inside a loop whose buffers fit the UB once but not twice: the double buffering
    (``multibuffer``, on by default for A2/A3) that overlaps the next tile's DMA with this tile's
    compute cannot be applied. triton-ascend's guidance keeps one iteration under half the UB."""

    id = "ascend_multibuffer_headroom"
    tier = "compiler"
    stage = "ttadapter"
    suggests = ("ub_retile", "multibuffer_hint")
    summary = "loop tiles too large to double-buffer"

    def detect(self, ctx):
        est = _ub_estimate(ctx.adapter)
        cap = ctx.target.ub_bytes
        if not est["loads_in_loops"] or est["estimate"] > cap:
            return []  # no pipelined loads, or plain overflow (UBOverflow reports it)
        doubled = est["estimate"] + est["loop_alloc_bytes"]
        if doubled <= cap:
            return []
        loop_allocs = [o for o in ctx.adapter.find("memref.alloc") if ctx.adapter.enclosing_loops(o)]
        default_on = not ctx.target.compile_on_910_95  # multibuffer defaults to off on the 950 path
        return [self.finding(
            ctx, f"loop tiles need {est['estimate'] // 1024} KB of UB; double-buffering the "
                 f"{est['loop_alloc_bytes'] // 1024} KB of loaded tiles needs {doubled // 1024} KB > "
                 f"{cap // 1024} KB, so DMA and compute cannot overlap"
                 + ("" if default_on else " (multibuffer is off by default on this target)"),
            op=loop_allocs[0], severity="medium" if default_on else "low",
            metric={"ub_estimate_bytes": est["estimate"], "double_buffered_bytes": doubled,
                    "ub_capacity_bytes": cap, "loop_loaded_bytes": est["loop_alloc_bytes"]})]


class GridOverLimit(Detector):
    """More than 65535 programs: triton-ascend 3.2 refuses the launch ("grid should be less than
    65536!") unless ``TRITON_ALL_BLOCKS_PARALLEL=1``; far more programs than cores means many waves
    of core start-up anyway."""

    id = "ascend_grid_over_65535"
    tier = "ir"
    stage = "ttir"
    suggests = ("grid_fold_to_cores",)
    summary = "grid larger than 65535 programs"

    def detect(self, ctx):
        n = ctx.num_programs
        if n <= MAX_GRID:
            return []
        pid = ctx.ttir.find("tt.get_program_id")
        return [self.finding(
            ctx, f"grid {tuple(ctx.grid)} = {n} programs > {MAX_GRID}: the triton-ascend launcher raises "
                 f"unless TRITON_ALL_BLOCKS_PARALLEL=1; fold the grid onto the cores and loop inside",
            op=pid[0] if pid else None, line=ctx.launch_line(), severity="high",
            metric={"num_programs": n, "grid": "x".join(map(str, ctx.grid)), "limit": MAX_GRID})]


class DotBlockNotMultipleOf16(Detector):
    """``tl.dot`` tiles whose M or N is not a multiple of 16, or whose K is not a multiple of the
    fractal depth (16 for fp16/bf16, 8 for fp32, 32 for int8: 32 bytes): the cube unit works on
    16 x 32-byte fractals, so the operands are padded and part of every cube op is wasted."""

    id = "ascend_dot_block_not_multiple_of_16"
    tier = "ir"
    stage = "ttir"
    suggests = ("block_multiple_of_16",)
    summary = "tl.dot tile dims not multiples of 16"

    def detect(self, ctx):
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
            out.append(self.finding(
                ctx, f"tl.dot tile M={m} N={n} K={k} ({a.element}): "
                     f"{', '.join(f'{d}={v}' for d, v in bad.items())} not aligned to the cube fractal "
                     f"(16 for M/N, {k_align} for K with {a.element}); operands are padded "
                     f"({waste:.0%} of the padded cube work wasted)",
                op=op, severity="medium",
                metric={"M": m, "N": n, "K": k, "dtype": a.element, "padded_waste": round(waste, 3)}))
        return out


def _ceil(v: int, a: int) -> int:
    return -(-v // a) * a


class GpuLaunchSettings(Detector):
    """GPU launch settings passed at the launch (``num_warps`` other than the default, ``num_stages``
    above 2, ``num_ctas``, ``maxnreg``): the Ascend SIMD path ignores them, so they are noise at best
    and mislead tuning (the Ascend knobs are the tile sizes, the grid and ``multibuffer``)."""

    id = "ascend_gpu_launch_settings"
    tier = "ir"
    stage = "ttir"
    suggests = ("remove_gpu_launch_settings",)
    summary = "GPU-only launch settings"

    def detect(self, ctx):
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
        return [self.finding(
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


class TooFewPrograms(Detector):
    """Fewer programs than the physical cores the kernel runs on (vector cores for ``mix_mode="aiv"``
    kernels, AI cores otherwise): the remaining cores stay idle for the whole launch."""

    id = "ascend_too_few_programs"
    tier = "ir"
    stage = "ttadapter"
    suggests = ("split_blocks_for_cores",)
    summary = "fewer programs than cores"

    def applies(self, ctx):
        return ctx.adapter is not None or ctx.ttir is not None

    def detect(self, ctx):
        mix = _mix_mode(ctx)
        cores = ctx.target.cores_for(mix)
        n = ctx.num_programs
        if n >= cores:
            return []
        kind = "vector" if mix.startswith("aiv") else "AI (cube)"
        return [self.finding(
            ctx, f"{n} program(s) for {cores} {kind} cores of {ctx.target.arch}: {cores - n} cores idle "
                 f"({n / cores:.0%} used); split the work so every core gets a share",
            line=ctx.launch_line(), severity="medium" if n * 2 <= cores else "low",
            metric={"num_programs": n, "cores": cores, "core_kind": kind, "mix_mode": mix,
                    "grid": "x".join(map(str, ctx.grid)), "utilization": round(n / cores, 3)})]


class ManyWaves(Detector):
    """Many more programs than cores: each program is one task on one core, so the launch runs in
    ``ceil(programs / cores)`` waves and pays core start-up and scalar set-up per program.
    triton-ascend's guide recommends a grid equal to the physical core count with a loop inside."""

    id = "ascend_grid_exceeds_cores"
    tier = "ir"
    stage = "ttadapter"
    suggests = ("grid_fold_to_cores",)
    summary = "grid much larger than the core count"
    min_waves = 4

    def applies(self, ctx):
        return ctx.adapter is not None or ctx.ttir is not None

    def detect(self, ctx):
        mix = _mix_mode(ctx)
        cores = ctx.target.cores_for(mix)
        n = ctx.num_programs
        waves = -(-n // cores)
        if waves < self.min_waves or n > MAX_GRID:
            return []
        return [self.finding(
            ctx, f"{n} programs on {cores} cores = {waves} waves of short tasks; a grid of {cores} programs "
                 f"looping over the work avoids the per-program start-up",
            line=ctx.launch_line(), severity="medium" if waves >= 16 else "low",
            metric={"num_programs": n, "cores": cores, "waves": waves, "mix_mode": mix})]


#: Every detector, in report order.
DETECTORS: tuple[Detector, ...] = (
    DiscreteScalarLoop(), UnstructuredAccess(), MaskInLoop(), BranchInLoop(), Int64IndexMath(),
    UBOverflow(), MultibufferHeadroom(), GridOverLimit(), DotBlockNotMultipleOf16(), GpuLaunchSettings(),
    TooFewPrograms(), ManyWaves(),
)
DETECTOR_IDS = tuple(d.id for d in DETECTORS)


def get_detector(det_id: str) -> Detector:
    for d in DETECTORS:
        if d.id == det_id:
            return d
    raise KeyError(det_id)


def catalog() -> list[dict]:
    """id, tier, stage, suggests and summary of every detector (for docs and the CLI)."""
    return [{"id": d.id, "tier": d.tier, "stage": d.stage, "suggests": list(d.suggests), "summary": d.summary}
            for d in DETECTORS]


def _run(ctx: KernelContext, detectors: Sequence[Detector] | None) -> list[Finding]:
    findings: dict[str, Finding] = {}
    for det in detectors or DETECTORS:
        if not det.applies(ctx):
            continue
        for f in det.detect(ctx):
            findings.setdefault(f.id, f)
    return list(findings.values())


def analyze_kernel(kernel: str, target: str | AscendTarget, *, ttir: str | None = None, ttadapter: str | None = None,
                   grid: Sequence[int] = (1, 1, 1), num_warps: int | None = None, num_warps_explicit: bool = False,
                   num_stages: int | None = None, launch_options: dict | None = None,
                   source_file: str | None = None, source: str | None = None,
                   detectors: Sequence[Detector] | None = None) -> list[Finding]:
    """Run the detectors on one kernel given as IR text (either stage may be missing)."""
    spec = resolve_target(target) if isinstance(target, str) else target
    g = tuple(list(grid) + [1, 1, 1])[:3]
    if source is None and source_file and Path(source_file).exists():
        source = Path(source_file).read_text()
    ctx = KernelContext(
        kernel=kernel, target=spec, ttir=parse_ttir(ttir) if ttir else None,
        adapter=parse_adapter_ir(ttadapter) if ttadapter else None, grid=g, num_warps=num_warps,
        num_warps_explicit=num_warps_explicit, num_stages=num_stages, launch_options=dict(launch_options or {}),
        source_file=source_file, source_lines=source.splitlines() if source is not None else None)
    return _run(ctx, detectors)


def context_for(capture: "AscendCapture", kc: "KernelCapture", source: str | None = None) -> KernelContext:
    source_file = capture.task_path
    if source is None and Path(source_file).exists():
        source = Path(source_file).read_text()
    ttir, adapter = kc.ir("ttir"), kc.ir("ttadapter")
    return KernelContext(
        kernel=kc.kernel, target=capture.target_info, ttir=parse_ttir(ttir) if ttir else None,
        adapter=parse_adapter_ir(adapter) if adapter else None, grid=tuple((kc.grid + [1, 1, 1])[:3]),
        num_warps=kc.num_warps, num_warps_explicit=kc.num_warps_explicit, num_stages=kc.num_stages,
        launch_options=kc.launch_options, source_file=source_file,
        source_lines=source.splitlines() if source is not None else None)


def run_detectors(capture: "AscendCapture", *, detectors: Sequence[Detector] | None = None,
                  source: str | None = None) -> list[Finding]:
    """Findings for every distinct kernel specialization in ``capture`` (repeated launches with the
    same specialization are analysed once)."""
    findings: dict[str, Finding] = {}
    for kc in capture.distinct():
        ctx = context_for(capture, kc, source)
        for f in _run(ctx, detectors):
            findings.setdefault(f.id, f)
    return list(findings.values())
