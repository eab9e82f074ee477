"""CUDA detectors of global memory access: vector width, alignment, 64-bit index math, atomics, masked
loads in loops, reloads across programs and multi-pass reductions."""

from __future__ import annotations

import re
from collections import Counter

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.detectors.common import (
    CONTIGUITY_RE,
    PTX_GLOBAL_ACCESS_RE,
    fast_dims,
    func_of,
    memory_ops,
    ptx_access_widths,
)
from tritondx.tools.ir.parse import IRLine
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.ir.ssa import Func, display
from tritondx.tools.ir.strides import strides
from tritondx.tools.records.evidence import Finding


# A load or store of one scalar value in TTGIR (its pointer is no tensor): one value per program, e.g. a row's
# scale or index; nothing can vectorize it.
#   %s_0 = tt.load %s : !tt.ptr<f32> loc(#loc21)
TTGIR_SCALAR_ACCESS_RE = re.compile(r"\btt\.(?:load|store)\b.*:\s*!tt\.ptr<[^<>]*>\s*(?:loc\(.*)?$")


def _access_width(m: re.Match) -> int:
    """Bytes one PTX global access moves per thread: its own vector count x element bits."""
    return int(m.group("vec") or 1) * int(m.group("bits")) // 8


def _access_name(m: re.Match) -> str:
    """'ld.global.v2.b32': the access without its cache qualifiers."""
    return f"{m.group('op')}.global{'.v' + m.group('vec') if m.group('vec') else ''}.{m.group('ty')}{m.group('bits')}"


@detector("non_vectorized_global_access", "ir", ("ptx",), ("alignment_hints", "launch_config"),
          "global loads/stores narrower than 16 bytes per thread", targets=("cuda",))
def _vector_width(det: Detector, k: KernelIR) -> list[Finding]:
    """Counts PTX `ld.global`/`st.global` by their own width (vector count x element bits: `ld.global.v2.b32` moves
    8 bytes, `st.global.b32` 4). Accesses of one scalar value per program (a TTGIR `tt.load`/`tt.store` on a plain
    `!tt.ptr`, mapped to the same source line) are left out: nothing can vectorize them. Fires when at least half
    of the remaining accesses move fewer than 16 bytes per thread; cites the source line with the most narrow
    accesses, and the message lists each width with its count."""
    ptx = k.ir("ptx")
    scalar_lines = set()
    if "ttgir" in k.texts:
        scalar_lines = {ln.src_line for ln in k.ir("ttgir").lines
                        if ln.src_line is not None and TTGIR_SCALAR_ACCESS_RE.search(ln.text)}
    narrow: list[tuple[IRLine, re.Match]] = []
    total = scalar = 0
    for ln in ptx.lines:
        m = PTX_GLOBAL_ACCESS_RE.search(ln.text)
        if not m:
            continue
        if not m.group("vec") and ln.src_line in scalar_lines:
            scalar += 1
            continue
        total += 1
        if _access_width(m) < 16:
            narrow.append((ln, m))
    if not total or not narrow:
        return []
    frac = len(narrow) / total
    if frac < 0.5:
        return []
    by_line = Counter(ln.src_line for ln, _ in narrow)
    worst_line = by_line.most_common(1)[0][0]
    ln, m = next(x for x in narrow if x[0].src_line == worst_line)
    kinds = Counter((_access_width(a), _access_name(a)) for _, a in narrow)
    widths = ", ".join(f"{n} x {w} bytes ({name})" for (w, name), n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    left_out = (f"; {scalar} load(s)/store(s) of one scalar per program left out (nothing can vectorize them)"
                if scalar else "")
    return [det.finding(k, f"{len(narrow)}/{total} global accesses move fewer than 16 bytes per thread: {widths}"
                           f"{left_out}; the compiler could not prove contiguity/alignment, or the block gives each "
                           "thread too few elements", ln, severity="high" if frac > 0.8 else "medium",
                        narrow_accesses=len(narrow), total_accesses=total, width_bytes=_access_width(m),
                        scalar_accesses=scalar)]


# 64-bit index arithmetic in a loop body:
#   %offs_64 = arith.extsi %offs : tensor<1024xi32, #blocked> to tensor<1024xi64, #blocked>
#   %9 = arith.muli %8, %c4096_i64 : i64
TTGIR_I64_ARITH_RE = re.compile(r"arith\.(?:muli|addi|extsi)\b.*(?:\b|\dx)i64\b")


@detector("int64_index_arithmetic", "ir", ("ttgir",), ("index_width",),
          "64-bit integer index arithmetic where 32 bits would do", targets=("cuda",))
def _i64(det: Detector, k: KernelIR) -> list[Finding]:
    """Tensor-wide `arith.extsi/addi/muli` producing `i64` in TTGIR (scalar 64-bit math is not reported)."""
    hits = [ln for ln in k.ir("ttgir").find(TTGIR_I64_ARITH_RE) if "tensor<" in ln.text]
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} tensor-wide 64-bit index ops (twice the integer work and registers of i32)",
                        hits[0], severity="low", ops=len(hits))]


# Atomic read-modify-write in TTGIR:  %5 = tt.atomic_rmw fadd, acq_rel, gpu, %ptr, %val, %mask : ...
TTGIR_ATOMIC_RE = re.compile(r"\btt\.atomic_(rmw|cas)\b")


@detector("atomics_in_hot_path", "ir", ("ttgir",), ("split_k", "fuse_passes"),
          "atomic read-modify-write operations on global memory", targets=("cuda",))
def _atomics(det: Detector, k: KernelIR) -> list[Finding]:
    """`tt.atomic_rmw` / `tt.atomic_cas` in TTGIR."""
    hits = k.ir("ttgir").find(TTGIR_ATOMIC_RE)
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} atomic RMW op(s); contended atomics serialize in L2", hits[0],
                        severity="medium", atomics=len(hits))]


# Masked load in a loop body (TTGIR):  %x = tt.load %ptr, %mask, %other : tensor<256x!tt.ptr<f32>, #blocked>
TTGIR_MASKED_LOAD_RE = re.compile(r"\btt\.load %\S+, %\S+")


@detector("masked_loads_in_loop", "ir", ("ttir",), ("mask_removal",),
          "loads inside a loop carry a mask on every iteration (masks written in the kernel, read from TTIR "
          "before the pipeliner adds its own predicates)", targets=("cuda",))
def _masked_loop(det: Detector, k: KernelIR) -> list[Finding]:
    """`tt.load` with a mask operand inside an `scf.for`, read from TTIR: the masks the kernel wrote, before
    the software pipeliner adds its own predicates to `cp.async` copies."""
    f = func_of(k, "ttir")
    if f is None:
        return []
    hits = [op for op in f.loads() if op.loops and op.name == "tt.load" and TTGIR_MASKED_LOAD_RE.search(op.text)]
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} masked load(s) inside a loop: the bound check runs every iteration "
                           "even where the shape divides the block", hits[0].line, stage="ttir", severity="low",
                        masked_loads=len(hits))]


@detector("missing_alignment_info", "ir", ("ttgir", "ptx"), ("alignment_hints", "mask_removal"),
          "an argument that feeds a contiguous access has no tt.divisibility (pointer not 16-byte aligned, integer "
          "not a multiple of 16, or not specialized), and the PTX access is narrower than 16 bytes", targets=("cuda",))
def _missing_alignment(det: Detector, k: KernelIR) -> list[Finding]:
    """For every global access (tt.load/tt.store, cp.async) whose layout's fastest dimension is unit-stride
    (the access *could* be vectorized), collect the function arguments that reach its address or mask
    (def-use closure over TTGIR). Fires when one of them has no `tt.divisibility` and the PTX accesses at
    that source line are narrower than 16 bytes. The JIT adds `tt.divisibility = 16` only to a pointer whose
    address is 16-byte aligned and to an integer that is a multiple of 16 (and never to an argument in
    `do_not_specialize`); a bare `triton.compile` without attrs has none. An unaligned pointer limits the
    access width directly; an unaligned bound (`offs < n`) limits it through the mask's constancy. Suggests
    `alignment_hints` always and `mask_removal` only when an unaligned integer reaches the mask (an unmasked
    fast path removes that limit; it cannot fix an unaligned address)."""
    f = func_of(k)
    if f is None:
        return []
    widths = ptx_access_widths(k)
    out, seen_lines = [], set()
    for op in memory_ops(f):
        pt = f.pointer_type(op)
        lay = f.layout(pt)
        if pt is None or lay is None or lay.kind != "ttg.blocked":
            continue
        fast, _ = fast_dims(lay, pt.shape)
        if fast is None or pt.shape[fast] < 2:
            continue
        addr, mask = f.address_operand(op), f.mask_operand(op)
        st = strides(f, addr)
        if len(st) != len(pt.shape) or st[fast].kind != "unit":
            continue  # not contiguous along the fast dim: alignment is not what limits it
        mask_roots = f.arg_origins(mask) if mask else set()
        roots = f.arg_origins(addr) | mask_roots
        missing = sorted((a for a in roots if a in f.args and f.args[a].divisibility is None
                          and (f.args[a].is_pointer or f.args[a].is_int)), key=lambda a: f.args[a].index)
        if not missing or op.src_line in seen_lines:
            continue
        w = widths.get(op.src_line, [])
        cm = CONTIGUITY_RE.search(op.body) if op.name == "ttg.async_copy_global_to_local" else None
        if cm:  # the pipeliner records the contiguity it copies with: {contiguity = 1 : i32} = 1 element per cp.async
            w = [int(cm.group(1)) * pt.elem_bytes]
        if w and min(w) >= 16:
            continue
        spt = lay.ints("sizePerThread")
        layout_bytes = min(16, (spt[fast] if fast < len(spt) else 1) * pt.elem_bytes)
        seen_lines.add(op.src_line)
        what = ", ".join(f"{display(a)} ({'pointer' if f.args[a].is_pointer else f.args[a].type})" for a in missing)
        ptx_note = (f"the PTX moves {min(w)} bytes per access where the layout gives {layout_bytes}" if w else
                    "no PTX access maps to this line")
        bound = any(a in mask_roots and f.args[a].is_int for a in missing)
        fd = det.finding(
            k, f"{what} carr{'ies' if len(missing) == 1 else 'y'} no tt.divisibility, so the axis analysis cannot "
               f"prove the contiguous {op.name} aligned; {ptx_note}. The JIT marks an argument 16-divisible only "
               "when its value is (16-byte-aligned pointer, integer multiple of 16) and it is not in "
               "do_not_specialize", op.line, severity="high" if w and min(w) < layout_bytes else "medium",
            arguments=",".join(display(a) for a in missing), ptx_bytes=min(w) if w else 0, layout_bytes=layout_bytes,
            unaligned_bound=bound)
        if not bound:
            fd.suggests = [s for s in fd.suggests if s != "mask_removal"]
        out.append(fd)
    return out


@detector("redundant_recomputation", "ir", ("ttgir",), ("persistent", "launch_config"),
          "work repeated across programs: a grid axis whose program id reaches no store, or a block every program "
          "loads at the same address (depends on no program id)", targets=("cuda",))
def _redundant(det: Detector, k: KernelIR) -> list[Finding]:
    """Two practical signals from the program-id dependence of the TTGIR (forward closure from each
    `tt.get_program_id` through every op, loop-carried values included):
    (1) a grid axis with more than one program whose program id reaches no store address, value or mask:
    every program along it writes the same outputs; (2) tensor loads whose address depends on no program
    id at all (at least 512 bytes per program): every program loads the same block (a weight or bias
    vector, or the whole input). Limits: it does not flag loads that depend on only some axes (a matmul's
    A tile is re-read by every program along N by design; that reuse is served by L2 and is what grouped
    ordering tunes), it cannot see reuse through L2, and block sizes are per program per loop iteration."""
    f = func_of(k)
    if f is None or k.programs <= 1:
        return []
    out = []
    axes = {"x": 0, "y": 1, "z": 2}
    stores = f.stores()
    reach: set[str] = set()
    for op in stores:
        for v in op.operands:
            reach |= f.pid_axes(v)
    for axis, i in axes.items():
        n = k.grid[i] if i < len(k.grid) else 1
        if n > 1 and axis not in reach and stores:
            used = axis in set(f.pid_values.values())
            out.append(det.finding(
                k, f"grid axis {i} has {n} programs but tl.program_id({i}) {'reaches' if used else 'is read by'} no "
                   f"store address, value or mask: the {n} programs along it compute and write the same outputs "
                   f"({n}x the work)", stores[0].line, severity="high", axis=i, programs_on_axis=n))
    invariant, dependent = [], 0
    for op in f.loads():
        pt = f.pointer_type(op)
        if op.name in ("tt.load", "ttg.async_copy_global_to_local") and pt is None:
            continue  # scalar loads
        pids = set().union(*(f.pid_axes(v) for v in f.address_values(op)))
        nbytes = pt.numel * pt.elem_bytes if pt else 0
        if not pids:
            invariant.append((op, nbytes))
        else:
            dependent += nbytes
    inv_bytes = sum(b for _, b in invariant)
    if invariant and inv_bytes >= 512:
        op = invariant[0][0]
        out.append(det.finding(
            k, f"{len(invariant)} load(s) ({inv_bytes} B per program{' per iteration' if op.loops else ''}) use an "
               f"address that depends on no program id: all {k.programs} programs read the same block "
               f"({dependent} B of per-program data next to it); a program that handles several rows/tiles reuses it "
               "from registers", op.line, severity="medium" if inv_bytes >= max(dependent, 1) else "low",
            invariant_bytes=inv_bytes, dependent_bytes=dependent, programs=k.programs))
    return out


def _exclusive(f: Func, a: int, b: int) -> bool:
    """Ops ``a`` and ``b`` sit in the two arms of one scf.if (only one of them runs per call)."""
    oa, ob = f.ops[a], f.ops[b]
    shared = set(oa.regions) & set(ob.regions)
    return any(f.ops[i].name == "scf.if" and ((i in oa.else_arms) != (i in ob.else_arms)) for i in shared)


def _one_arm(f: Func, loops: list[int]) -> list[int]:
    """The largest group of ``loops`` that can all run in one call: loops in the then and else regions
    of one scf.if (an EVEN fast path and its masked twin) are one pass each way, not two passes."""
    best: list[int] = []
    for first in loops:
        group = [first]
        for lp in loops:
            if lp != first and not any(_exclusive(f, lp, g) for g in group):
                group.append(lp)
        if len(group) > len(best):
            best = group
    return sorted(best)


@detector("multi_pass_reduction", "ir", ("ttgir",), ("fuse_passes",),
          "several loops in one kernel stream the same base pointer argument: the data is read once per pass", targets=("cuda",))
def _multi_pass(det: Detector, k: KernelIR) -> list[Finding]:
    """Loads inside loops are grouped by the pointer argument their address derives from and by their
    innermost loop; fires when one argument is streamed by two or more sibling loops (not nested in each
    other): the same data is read from memory once per pass (mean, then variance, then normalize)."""
    f = func_of(k)
    if f is None:
        return []
    by_arg: dict[str, dict[int, object]] = {}
    for op in f.loads():
        if not op.loops:
            continue
        for a in set().union(*(f.arg_origins(v) for v in f.address_values(op))):
            arg = f.args.get(a)
            if arg is None or not (arg.is_pointer or arg.type.startswith("!tt.tensordesc")):
                continue
            by_arg.setdefault(a, {}).setdefault(op.loops[-1], op)
    out = []
    for a, loops in by_arg.items():
        # sibling loops only: a loop nested in another is the same pass
        tops = [lp for lp in loops if not any(lp != other and other in f.ops[lp].loops for other in loops)]
        tops = _one_arm(f, tops)
        if len(tops) < 2:
            continue
        ops = [loops[lp] for lp in sorted(tops)]
        lines = [o.src_line for o in ops]
        out.append(det.finding(
            k, f"{display(a)} is read in {len(tops)} separate loops (loads at lines "
               f"{', '.join(str(x) for x in lines)}): the same data crosses the memory bus {len(tops)} times; one "
               "pass with running statistics (online max/sum, Welford) reads it once", ops[0].line,
            severity="high" if len(tops) >= 3 else "medium", passes=len(tops), argument=display(a)))
    return out
