"""CUDA detectors of layouts: convert_layout ops, an access pattern the chosen layout does not coalesce, and
shared-memory bank conflicts of a layout's reads."""

from __future__ import annotations

import math
import re

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.detectors.common import MEMDESC_RE, elem_bytes_of, fast_dims, func_of, memory_ops
from tritondx.tools.ir.layouts import Layout, layout_of
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.ir.ssa import Func, display
from tritondx.tools.ir.strides import strides
from tritondx.tools.records.evidence import Finding


# Layout conversion left in the final TTGIR:
#   %12 = ttg.convert_layout %11 : tensor<128xf32, #blocked> -> tensor<128xf32, #blocked1>
TTGIR_CVT_RE = re.compile(r"\bttg\.convert_layout\b")


@detector("excessive_layout_conversions", "ir", ("ttgir",), ("launch_config",),
          "layout conversions (shared-memory round trips) survive in the final TTGIR", targets=("cuda",))
def _cvt(det: Detector, k: KernelIR) -> list[Finding]:
    """Three or more `ttg.convert_layout` ops left in the final TTGIR (each may round-trip through shared memory)."""
    hits = k.ir("ttgir").find(TTGIR_CVT_RE)
    if len(hits) < 3:
        return []
    return [det.finding(k, f"{len(hits)} ttg.convert_layout ops remain after RemoveLayoutConversions", hits[0],
                        severity="medium", conversions=len(hits))]


def _paired_addresses(f: Func) -> set[str]:
    """Address tensors of memory ops that another memory op reads or writes one element further on
    (``tt.addptr %p, %cst`` with ``%cst = arith.constant dense<1>``), both ends: the two halves of an interleaved
    pair (``x_ptrs`` and ``x_ptrs + 1``)."""
    addrs = {a for op in memory_ops(f) if (a := f.address_operand(op))}
    out = set()
    for a in addrs:
        d = f.defs.get(a)
        if d is not None and d.name == "tt.addptr" and len(d.operands) >= 2 and d.operands[0] in addrs \
                and f.const_value(d.operands[1]) == 1:
            out |= {a, d.operands[0]}
    return out


@detector("uncoalesced_access", "ir", ("ttgir",), ("alignment_hints", "launch_config", "tile_2d"),
          "the layout's fastest dimension is not the pointer's contiguous one: consecutive lanes touch addresses "
          "a stride apart (strided or transposed access)", targets=("cuda",))
def _uncoalesced(det: Detector, k: KernelIR) -> list[Finding]:
    """For every global access with a blocked layout, the dimension along which consecutive lanes of a warp
    vary (first dim in `order` with threadsPerWarp > 1) is checked against the per-dimension stride of the
    address, re-derived from the def-use chain (`make_range`, `splat`, `expand_dims`, `broadcast`, `addi`,
    `muli`, `addptr`, `remsi`). Fires when that dimension is scaled by a runtime stride or by a constant of
    more than 4 bytes: lanes touch addresses a stride apart. The message says whether another dimension
    is unit-stride (a transposed access: the layout's order does not match the pointer's contiguous
    dimension, e.g. contiguity hidden behind a modulo) or none is provably unit-stride (a stride of 1 that
    the JIT did not specialize). Gathers (offsets loaded from memory) are not reported."""
    f = func_of(k)
    if f is None:
        return []
    paired = _paired_addresses(f)
    out, seen_lines = [], set()
    for op in memory_ops(f):
        pt = f.pointer_type(op)
        lay = f.layout(pt)
        if pt is None or lay is None or lay.kind != "ttg.blocked":
            continue
        _, lane = fast_dims(lay, pt.shape)
        if lane is None or pt.shape[lane] < 2:
            continue
        st = strides(f, f.address_operand(op))
        if len(st) != len(pt.shape):
            continue
        s = st[lane]
        if s.kind != "scaled" or (s.factor is not None and s.factor < 2):
            continue
        if op.src_line in seen_lines:
            continue
        seen_lines.add(op.src_line)
        unit = [d for d, x in enumerate(st) if x.kind == "unit" and pt.shape[d] > 1]
        spt = lay.ints("sizePerThread")
        if len(unit) == 1 and len(spt) == len(pt.shape) and spt[unit[0]] >= pt.shape[unit[0]] == s.factor:
            continue   # each lane holds its whole run of the unit-stride dim, the next lane's starts where it ends
        stride = f"{s.factor} elements" if s.factor else (display(s.by) if s.by else "a runtime stride")
        # with a unit-stride dimension, an access one element on is a shifted tile, not the other half of a pair
        pair_dim = next((d for d, x in enumerate(st) if x.kind == "scaled" and x.factor == 2 and pt.shape[d] > 1),
                        None) if f.address_operand(op) in paired and not unit else None
        if pair_dim is not None:
            why = (f"dim {pair_dim} steps by 2 elements and the access one element beside it reads the other half: an "
                   "interleaved pair (real/imaginary, a rope's even/odd halves) read as two tensors, so no dimension "
                   "is contiguous; one flat tile of both, reshaped to [..., 2] and taken apart with tl.split, is "
                   "contiguous along that dimension and vectorizes")
        elif unit:
            why = (f"the pointer is contiguous along dim {unit[0]}"
                   f"{' (through a modulo the axis analysis cannot see through)' if st[unit[0]].wraps else ''}, "
                   f"but the layout orders dim {lane} fastest (order={lay.order}): a transposed access")
        elif sum(1 for d in pt.shape if d > 1) <= 1:
            why = ("the block walks a strided dimension (a column of a row-major matrix, an interleaved field); a "
                   "tile that puts a contiguous dimension on the lanes reads whole lines")
        else:
            why = ("no dimension is provably unit-stride (a stride equal to 1 is only known when the JIT specializes "
                   "it; do_not_specialize or a computed stride hides it)")
        stride_bytes = None if s.factor is None else s.factor * pt.elem_bytes
        eff = pt.elem_bytes / min(32, stride_bytes) if stride_bytes else pt.elem_bytes / 32
        out.append(det.finding(
            k, f"{op.name} of a {'x'.join(map(str, pt.shape))} {pt.pointee} tile: consecutive lanes along dim {lane} "
               f"are {stride} apart, so a warp access uses ~{eff:.0%} of the 32-byte sectors it fetches; {why}",
            op.line,
            severity="high" if s.factor is None or s.factor * pt.elem_bytes >= 32 else "medium" if s.factor * pt.elem_bytes > 4 else "low",
            lane_dim=lane, stride=str(s.factor or (display(s.by) if s.by else "runtime")), order=str(lay.order),
            contiguous_dim=unit[0] if unit else -1))
    return out


# Dot-operand encoding of a register tensor:  #ttg.dot_op<{opIdx = 0, parent = #blocked}>
DOT_OP_ENC_RE = re.compile(r"#ttg\.dot_op<\{opIdx = (?P<idx>\d), parent = (?P<parent>#[\w.]+(?:<\{[^}]*\}>)?)")


def _lane_rows(enc: str | None, shape: tuple[int, ...], layouts: dict[str, Layout]) -> tuple[int, int] | None:
    """(dim along which lanes of a warp take different rows/columns, how many distinct ones) for a register layout."""
    if not enc:
        return None
    m = DOT_OP_ENC_RE.search(enc)
    if m:
        idx = int(m.group("idx"))
        dim = 0 if idx == 0 else 1        # lanes vary along M for A, along N for B (K is the loop dim)
        parent = layout_of(m.group("parent"), layouts)
        if parent is not None and parent.kind == "ttg.blocked":
            tpw = parent.ints("threadsPerWarp")
            return dim, tpw[dim] if dim < len(tpw) else 1
        return dim, 8                       # mma operands: ldmatrix reads 8 rows per 8x8 tile
    lay = layout_of(enc, layouts)
    if lay is None or lay.kind != "ttg.blocked":
        return None
    _, lane = fast_dims(lay, shape)
    if lane is None:
        return None
    tpw = lay.ints("threadsPerWarp")
    return lane, tpw[lane] if lane < len(tpw) else 1


@detector("shared_memory_bank_conflicts", "ir", ("ttgir",), ("tl_dot", "launch_config"),
          "a register layout reads or writes an unswizzled shared buffer across its rows: lanes land in the same "
          "bank (estimated n-way conflict)", targets=("cuda",))
def _bank_conflicts(det: Detector, k: KernelIR) -> list[Finding]:
    """Heuristic on TTGIR: a `ttg.local_load`, `ttg.local_store` or `ttg.local_alloc` from registers whose
    shared buffer is `#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1}>` (no swizzle: every row
    starts in bank 0) and whose register layout spreads the lanes of a warp across rows of the buffer
    (the lane dimension is not the buffer's contiguous `order[0]`): a transposed access. For a blocked
    layout the lane dimension is the first in `order` with threadsPerWarp > 1; for a `#ttg.dot_op` it is
    M for operand A and N for operand B (threadsPerWarp of the parent; 8 rows for an MMA parent). With a
    row pitch of P 4-byte words, L lanes on different rows hit 32/gcd(P, 32) distinct banks, so the
    estimate is ceil(L / min(L, 32/gcd(P, 32)))-way; fires from 4-way. Swizzled and NVMMA layouts, 1-D
    buffers (barriers) and async-copy-only buffers are not considered."""
    f = func_of(k)
    if f is None:
        return []
    out, seen = [], set()
    for op in f.ops:
        if op.name not in ("ttg.local_load", "ttg.local_store", "ttg.local_alloc"):
            continue
        md = MEMDESC_RE.search(op.body)
        if not md:
            continue
        shared = layout_of(md.group("enc"), f.layouts)
        if shared is None or shared.kind != "ttg.swizzled_shared" or shared.num("maxPhase", 1) != 1:
            continue
        shape = tuple(int(x) for x in md.group("shape").split("x") if x)
        if len(shape) < 2:
            continue  # barriers and 1-D buffers
        shape = shape[-2:]  # a multi-buffered allocation (stages x rows x cols) is read one buffer at a time
        reg = op.result_type if op.name == "ttg.local_load" else next(iter(op.operand_types), None)
        if reg is None:
            continue  # an allocation without a register source (filled by async copies)
        lr = _lane_rows(reg.enc, reg.shape, f.layouts)
        order = shared.order
        if lr is None or not order:
            continue
        lane_dim, lanes = lr
        fast = order[0] if len(order) == len(shape) else len(shape) - 1
        if lane_dim == fast or lanes < 2:
            continue  # lanes walk along the contiguous dimension of the buffer: no conflict
        pitch_words = max(1, shape[fast] * elem_bytes_of(md.group("elem")) // 4)
        distinct_banks = 32 // math.gcd(pitch_words, 32)
        ways = math.ceil(lanes / min(lanes, distinct_banks))
        if ways < 4 or op.src_line in seen:
            continue
        seen.add(op.src_line)
        out.append(det.finding(
            k, f"{op.name} of a {'x'.join(map(str, shape))} {md.group('elem')} buffer in {md.group('enc')} "
               f"(vec={shared.num('vec', 1)}, perPhase={shared.num('perPhase', 1)}, maxPhase=1: no swizzle, "
               f"order={order}): {lanes} lanes of a warp access "
               f"different rows along dim {lane_dim}, {shape[fast] * elem_bytes_of(md.group('elem'))} bytes apart, "
               f"which map to the same bank: ~{ways}-way bank conflict", op.line,
            severity="high" if ways >= 16 else "medium", ways=ways, lanes=lanes,
            row_bytes=shape[fast] * elem_bytes_of(md.group("elem"))))
    return out
