"""Work a kernel launch does, counted from its IR: matmul FLOPs and global bytes, times trip counts.

The capture job compiles each launch with its real arguments and records the runtime scalars
(``record["scalars"]``: ``M``, ``N``, ``K``, strides ...). Here the TTIR of one launch is read
through :mod:`tritondx.tools.ir.ssa`:

- every ``tt.dot`` adds ``2 * M * N * K`` (from its operand types, ``tensor<MxK> * tensor<KxN>``),
- every global load/store adds its tile's elements times the element size,

each multiplied by the trip counts of the loops around it (``scf.for`` bounds evaluated from
constants and the launch's scalars) and by the number of programs in the grid. Masked-off lanes are
counted (an upper bound of the issued work); a loop whose bounds depend on the program id or on a
loaded value has no trip count here, and then the figure it holds is left unknown, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritondx.tools.ir.ssa import LOAD_OPS, STORE_OPS, Func, Op, kernel_func

DOT_OPS = ("tt.dot", "tt.dot_scaled")
# integer ops a loop bound is computed with (tl.cdiv, min/max, casts)
_BINARY = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: int(a / b) if b else None,
    "arith.divui": lambda a, b: a // b if b else None,
    "arith.ceildivsi": lambda a, b: -(-a // b) if b else None,
    "arith.ceildivui": lambda a, b: -(-a // b) if b else None,
    "arith.floordivsi": lambda a, b: a // b if b else None,
    "arith.remsi": lambda a, b: a - b * int(a / b) if b else None,
    "arith.remui": lambda a, b: a % b if b else None,
    "arith.maxsi": max, "arith.maxui": max, "arith.minsi": min, "arith.minui": min,
    "arith.shli": lambda a, b: a << b,
    "arith.shrsi": lambda a, b: a >> b, "arith.shrui": lambda a, b: a >> b,
}
_CASTS = ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui")


@dataclass
class LaunchWork:
    """What one launch does, by the IR's count."""

    kernel: str
    programs: int
    flops: int | None = 0            # tl.dot multiply-adds x 2; None: a dot sits in a loop of unknown length
    bytes_loaded: int | None = 0     # global loads; None: unknown trip count
    bytes_stored: int | None = 0
    dots: int = 0                    # tl.dot ops in the IR (before trip counts)
    notes: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int | None:
        if self.bytes_loaded is None or self.bytes_stored is None:
            return None
        return self.bytes_loaded + self.bytes_stored


def int_value(func: Func, value: str, scalars: dict[str, Any], depth: int = 0) -> int | None:
    """The integer a scalar SSA value holds at this launch, or None when it is not known statically."""
    if depth > 64:
        return None
    if value in func.consts:
        return func.consts[value]
    if value in func.args:
        v = scalars.get(value.split("@")[0])
        return int(v) if isinstance(v, (int, bool)) else None
    op = func.defs.get(value)
    if op is None or op.result_type is not None:  # induction variables, tensors
        return None
    if op.name in _CASTS and op.operands:
        return int_value(func, op.operands[0], scalars, depth + 1)
    fn = _BINARY.get(op.name)
    if fn and len(op.operands) >= 2:
        a = int_value(func, op.operands[0], scalars, depth + 1)
        b = int_value(func, op.operands[1], scalars, depth + 1)
        return None if a is None or b is None else fn(a, b)
    if op.name == "arith.select" and len(op.operands) >= 3:
        c = int_value(func, op.operands[0], scalars, depth + 1)
        if c is not None:
            return int_value(func, op.operands[1 if c else 2], scalars, depth + 1)
    return None


def trip_count(func: Func, loop: Op, scalars: dict[str, Any]) -> int | None:
    """Iterations of one ``scf.for`` at this launch (None for ``scf.while`` or unknown bounds)."""
    if loop.name != "scf.for" or len(loop.operands) < 3:
        return None
    lb, ub, step = (int_value(func, v, scalars) for v in loop.operands[:3])
    if lb is None or ub is None or not step:
        return None
    return max(0, -(-(ub - lb) // step))


def _times(func: Func, op: Op, scalars: dict[str, Any], memo: dict[int, int | None]) -> int | None:
    n = 1
    for idx in op.loops:
        if idx not in memo:
            memo[idx] = trip_count(func, func.ops[idx], scalars)
        if memo[idx] is None:
            return None
        n *= memo[idx]
    return n


def _access_bytes(func: Func, op: Op) -> int:
    t = func.pointer_type(op)
    if t is not None:
        return t.numel * t.elem_bytes
    if op.name in LOAD_OPS and op.result_type is not None:   # descriptor loads: the tile they return
        return op.result_type.numel * op.result_type.elem_bytes
    types = op.operand_types
    if op.name in STORE_OPS and len(types) > 1:                # descriptor stores: the tile they write
        return types[-1].numel * types[-1].elem_bytes
    return 4 if not types else types[0].numel * types[0].elem_bytes  # a scalar access: one element


def _dot_flops(op: Op) -> int | None:
    types = op.operand_types
    if len(types) < 2 or len(types[0].shape) < 2 or len(types[1].shape) < 2:
        return None
    a, b = types[0].shape, types[1].shape
    batch = 1
    for d in a[:-2]:
        batch *= d
    return 2 * batch * a[-2] * a[-1] * b[-1]


def launch_work(record: dict[str, Any], ttir: str) -> LaunchWork:
    """Count one captured launch (a manifest record and its TTIR text)."""
    grid = list(record.get("grid") or [1, 1, 1])
    programs = 1
    for g in grid:
        programs *= int(g)
    work = LaunchWork(kernel=record.get("kernel", "?"), programs=programs)
    func = kernel_func(ttir, name=record.get("kernel"))
    if func is None:
        work.flops = work.bytes_loaded = work.bytes_stored = None
        work.notes.append("no tt.func in the TTIR")
        return work
    scalars = record.get("scalars") or {}
    memo: dict[int, int | None] = {}
    for op in func.ops:
        kind = "dot" if op.name in DOT_OPS else "load" if op.name in LOAD_OPS else \
            "store" if op.name in STORE_OPS else None
        if kind is None:
            continue
        times = _times(func, op, scalars, memo)
        if kind == "dot":
            work.dots += 1
            f = _dot_flops(op)
            if times is None or f is None or work.flops is None:
                work.flops = None
                work.notes.append(f"tl.dot at source line {op.src_line}: loop of unknown length")
            else:
                work.flops += f * times * programs
            continue
        size = _access_bytes(func, op)
        attr = "bytes_loaded" if kind == "load" else "bytes_stored"
        cur = getattr(work, attr)
        if times is None or cur is None:
            if cur is not None:
                work.notes.append(f"{op.name} at source line {op.src_line}: loop of unknown length")
            setattr(work, attr, None)
        else:
            setattr(work, attr, cur + size * times * programs)
    return work


def total_work(launches: list[LaunchWork]) -> dict[str, Any]:
    """One launcher call: the sum over its launches (a figure is None when any launch's is)."""
    def add(key: str) -> int | None:
        vals = [getattr(w, key) for w in launches]
        return None if not launches or any(v is None for v in vals) else sum(vals)
    return {"flops": add("flops"), "bytes": add("bytes"), "bytes_loaded": add("bytes_loaded"),
            "bytes_stored": add("bytes_stored"), "dots": sum(w.dots for w in launches),
            "launches": len(launches), "notes": [n for w in launches for n in w.notes][:6]}
