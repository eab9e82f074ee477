"""How an index or address tensor of a kernel varies along each dimension (``const``, ``unit``, ``scaled``,
``gather``, ``irregular``), from ``make_range``/``splat``/``expand_dims``/``broadcast``/``addi``/``muli``/
``addptr`` chains of the def-use view (``ssa``). A syntactic re-derivation of what the axis analysis should
see, used to tell when the layout the compiler chose disagrees with the access pattern; ops it does not know
give ``unknown``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tritondx.tools.ir.ssa import LOAD_OPS, Func

# expand_dims axis:  tt.expand_dims %rm_5 {axis = 1 : i32}
AXIS_RE = re.compile(r'axis\s*=\s*(\d+)')
# tt.trans order:  tt.trans %y_26 {order = array<i32: 1, 0>}
TRANS_ORDER_RE = re.compile(r'order\s*=\s*array<i32:\s*([\d,\s]+)>')
# ops whose result strides equal their (first) operand's
PASS_THROUGH_OPS = ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui",
                    "tt.bitcast", "ttg.convert_layout", "tt.int_to_ptr", "tt.ptr_to_int", "arith.bitcast")


@dataclass
class Stride:
    """How an index/address tensor varies along one dimension."""

    kind: str                     # const | unit | scaled | gather | irregular | unknown
    factor: int | None = None     # for scaled: the known element stride (None when a runtime value)
    by: str | None = None         # for scaled: the SSA value it is scaled by, if not a constant
    wraps: bool = False           # unit stride through a modulo (contiguous, but not provably)


CONST = Stride("const")


def _combine_add(a: Stride, b: Stride) -> Stride:
    """Stride of a sum: strides add (i*s + i has stride s+1; a known part and a runtime part stay runtime)."""
    if a.kind == "const":
        return b
    if b.kind == "const":
        return a
    for k in ("gather", "unknown", "irregular"):
        if k in (a.kind, b.kind):
            return Stride(k)
    fa = 1 if a.kind == "unit" else a.factor
    fb = 1 if b.kind == "unit" else b.factor
    if fa is not None and fb is not None:
        return Stride("scaled", fa + fb) if fa + fb != 1 else Stride("unit")
    return Stride("scaled", None, a.by or b.by)


def strides(func: Func, value: str) -> tuple[Stride, ...]:
    """Per-dimension variation of an index or pointer tensor (see the module docstring)."""
    memo: dict[str, tuple[Stride, ...]] = {}
    return _strides(func, value, memo, 0)

def _rank(func: Func, value: str) -> int:
    op = func.defs.get(value)
    t = op.result_type if op else None
    return len(t.shape) if t else 0

def _strides(func: Func, value: str, memo: dict, depth: int) -> tuple[Stride, ...]:
    if value in memo:
        return memo[value]
    memo[value] = tuple(Stride("unknown") for _ in range(max(_rank(func, value), 1)))
    res = _strides_uncached(func, value, memo, depth)
    memo[value] = res
    return res

def _strides_uncached(func: Func, value: str, memo: dict, depth: int) -> tuple[Stride, ...]:
    if depth > 200:
        return (Stride("unknown"),)
    if value in func.args:
        return ()
    if value in func.iter_init:
        return _strides(func, func.iter_init[value], memo, depth + 1)
    op = func.defs.get(value)
    if op is None:
        return ()  # induction variables, block arguments: scalars
    rank = len(op.result_type.shape) if op.result_type else 0
    name = op.name
    ops = op.operands

    def sub(v: str) -> tuple[Stride, ...]:
        s = _strides(func, v, memo, depth + 1)
        if len(s) < rank:  # a scalar (or lower-rank) operand: constant along every dim
            s = tuple([CONST] * (rank - len(s))) + tuple(s)
        return s

    if rank == 0:
        return ()
    if name == "tt.make_range":
        return (Stride("unit"),)
    if name in ("arith.constant", "tt.splat", "tt.get_program_id", "tt.get_num_programs"):
        return tuple([CONST] * rank)
    if name == "tt.expand_dims" and ops:
        src = list(_strides(func, ops[0], memo, depth + 1))
        m = AXIS_RE.search(op.body)
        axis = int(m.group(1)) if m else 0
        src = src + [CONST] * max(0, rank - 1 - len(src))
        src.insert(min(axis, len(src)), CONST)
        return tuple(src[:rank])
    if name == "tt.broadcast" and ops:
        return sub(ops[0])
    if name == "tt.trans" and ops:
        src = sub(ops[0])
        m = TRANS_ORDER_RE.search(op.body)
        order = [int(x) for x in m.group(1).split(",")] if m else list(range(rank))[::-1]
        return tuple(src[i] for i in order) if len(src) == len(order) else tuple(Stride("unknown") for _ in range(rank))
    if name in PASS_THROUGH_OPS and ops:
        return sub(ops[0])
    if name in ("arith.addi", "tt.addptr", "arith.subi", "arith.ori") and len(ops) >= 2:
        a, b = sub(ops[0]), sub(ops[1])
        if name == "arith.subi":
            b = tuple(s if s.kind == "const" else Stride("irregular") if s.kind == "unit" else s for s in b)
        return tuple(_combine_add(x, y) for x, y in zip(a, b))
    if name in ("arith.muli", "arith.shli") and len(ops) >= 2:
        a, b = sub(ops[0]), sub(ops[1])
        if all(s.kind == "const" for s in b):
            var, scale = a, ops[1]
        elif all(s.kind == "const" for s in a):
            var, scale = b, ops[0]
        else:
            return tuple(Stride("irregular") for _ in range(rank))
        k = func.const_value(scale)
        if name == "arith.shli" and k is not None:
            k = 1 << k
        out = []
        for s in var:
            if s.kind == "const":
                out.append(CONST)
            elif k == 1:
                out.append(s)
            elif s.kind in ("unit", "scaled"):
                f = (s.factor or 1) * k if (k is not None and (s.kind == "unit" or s.factor)) else None
                out.append(Stride("scaled", f, None if k is not None else func.scalar_name(scale)))
            else:
                out.append(s)
        return tuple(out)
    if name in ("arith.remsi", "arith.remui") and len(ops) >= 2:
        a = sub(ops[0])
        return tuple(Stride("unit", wraps=True) if s.kind == "unit" else
                     (CONST if s.kind == "const" else Stride("irregular")) for s in a)
    if name in ("arith.divsi", "arith.divui", "arith.shrsi", "arith.shrui") and len(ops) >= 2:
        # i // d gives runs of d equal values: constant across a warp when d >= 32 or a runtime value
        # (row index of a flattened offset); a small known divisor mixes lanes: irregular
        a = sub(ops[0])
        d = func.const_value(ops[1])
        if d is not None and name in ("arith.shrsi", "arith.shrui"):
            d = 1 << d
        runs = d is None or d >= 32
        return tuple(CONST if s.kind == "const" or (runs and s.kind == "unit") else Stride("irregular") for s in a)
    if name == "arith.andi" and len(ops) >= 2:
        a = sub(ops[0])
        return tuple(CONST if s.kind == "const" else Stride("irregular") for s in a)
    if name in ("arith.select",) and len(ops) >= 3:
        a, b = sub(ops[1]), sub(ops[2])
        return tuple(x if (x.kind == y.kind and x.factor == y.factor) else _combine_add(x, y) if "const" in (x.kind, y.kind) else Stride("irregular")
                     for x, y in zip(a, b))
    if name in LOAD_OPS or name == "ttg.local_load":
        return tuple(Stride("gather") for _ in range(rank))
    return tuple(Stride("unknown") for _ in range(rank))
