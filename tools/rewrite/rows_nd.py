"""Several rows per program for a kernel whose blocks are already 2-D or more (``rows_per_program``'s N-D path).

``rows_per_program`` makes a 1-D kernel's block a column of rows. A kernel whose block is already 2-D (a token's
heads x a head's elements, groups x group elements: ``offs_g[:, None] * stride + offs_d[None, :]``) needs one
more axis, in front: every value that depends on the row index gets a leading axis of ``TDX_BLOCK_R`` rows, every
other value stays as it is (broadcasting puts it beside the rows). The rules, from each expression's rank in the
original kernel (``Ranks``):

- ``tl.program_id(a)`` becomes ``_tdx_rows`` (``pid * TDX_BLOCK_R + tl.arange(0, TDX_BLOCK_R)``, shape ``[R]``),
  ``tl.num_programs(a)`` the row count ``TDX_ROWS``;
- a row value of rank ``r`` met by a value of rank ``r + k`` (an operator, an elementwise call, a load's or a
  store's pointer, mask and value) is expanded after its row axis: ``x[:, None]`` for ``k = 1``; an original
  scalar (rank 0) that depends on the row, a token's destination index say, becomes a vector of ``R``;
- a subscript of a row value gets a leading ``:`` (``x[:, None]`` -> ``x[:, :, None]``);
- a reduction of a row value over axis ``a >= 0`` reduces axis ``a + 1`` (negative axes stay); over the whole of a
  1-D value, over axis 1;
- ``tl.zeros``/``tl.full`` get the rows in front of their shape; a Python scalar that a loop updates with row
  values (``m_i = -float("inf")``, ``l_i = 0.0``) starts as ``tl.full([TDX_BLOCK_R], value, dtype)``;
- every load and store whose pointer depends on the row gets ``& _tdx_rows_ok`` (expanded to the pointer's rank)
  in its mask.

A kernel is left alone where a rule does not hold: an ``if``/``while`` on a row value, a loop whose bounds depend
on the row, a loop that changes a value's rank or row dependence (other than a scalar accumulator), a store
whose address does not depend on the row, a reduction of the whole of a row value of rank 2 or more, an index
(not ``:``/``None``) in a subscript of a row value, a call of another jit function, or any call
``rows_per_program.FORBIDDEN`` names. The verifier decides the rest.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.cst_util import (add_call_kwargs, add_params, calls_named, code_of, dotted, expr,
                                             with_prelude)
from tritondx.tools.rewrite.tile_2d import _axis, _ptr, _with_row_mask

ROWS, ROWS_OK, ROWS_N, BLOCK_R = "_tdx_rows", "_tdx_rows_ok", "TDX_ROWS", "TDX_BLOCK_R"
COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
REDUCTIONS = ("tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin", "tl.xor_sum")
#: calls whose value is a scalar of the host's kind, never a block
SCALAR_CALLS = ("tl.cdiv", "triton.cdiv", "float", "int", "min", "max", "len", "range", "tl.static_range", "tl.range")


class Refused(Exception):
    """The kernel breaks one of the module's rules (the message says which)."""


class _Promote(Exception):
    """A Python scalar that a loop gives row values: analyse again with it a vector of rows from the start."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _number_kind(e: cst.BaseExpression) -> str | None:
    """"tl.float32" or "tl.int32" for a number written as ``0``, ``0.0``, ``-1``, ``float("-inf")``,
    ``-float("inf")``; None for anything else."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        return _number_kind(e.expression)
    if isinstance(e, cst.Float):
        return "tl.float32"
    if isinstance(e, cst.Integer):
        return "tl.int32"
    if isinstance(e, cst.Call) and dotted(e.func) == "float" and len(e.args) == 1 and \
            isinstance(e.args[0].value, (cst.SimpleString, cst.Integer, cst.Float)):
        return "tl.float32"
    return None


class Ranks:
    """Each expression's (rank, depends on the row) in the original kernel, the row values of lower rank that an
    expression's other operands make wider (``expand``: node id -> axes to add after the row axis), and the
    highest rank of a block (``widest``)."""

    def __init__(self, fn: cst.FunctionDef, axis: int) -> None:
        self.axis = axis
        self.promoted: set[str] = set()   # Python scalars a loop gives row values: each row gets its own
        for _ in range(16):
            self.info: dict[int, tuple[int, bool]] = {}
            self.expand: dict[int, int] = {}
            self.loads: dict[int, int] = {}      # load/store node id -> rank of its pointer (row pointers only)
            self.subs: set[int] = set()          # subscripts of row values
            self.reduce: dict[int, str] = {}     # reduction node id -> "shift" (axis + 1) or "all1" (axis=1)
            self.shapes: set[int] = set()        # tl.zeros / tl.full
            self.scalars: dict[int, str] = {}    # a promoted scalar's first value (node id) -> its element type
            self.literal: set[str] = set()       # names whose last value is a number
            self.widest = 0
            try:
                self._block(fn.body.body, {})
                return
            except _Promote as p:
                self.promoted.add(p.name)
        raise Refused("too many scalar accumulators")

    # -- statements -----------------------------------------------------------------------------------------------
    def _block(self, stmts, env: dict) -> None:
        for s in stmts:
            self._stmt(s, env)

    def _stmt(self, s, env: dict) -> None:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                self._small(small, env)
            return
        if isinstance(s, cst.For):
            if self._expr(s.iter, env)[1]:
                raise Refused("a loop whose bounds depend on the row")
            if not isinstance(s.target, cst.Name):
                raise Refused("a loop target that is not a name")
            before, literal = dict(env), set(self.literal)
            env[s.target.value] = (0, False)
            self._block(_suite(s.body), env)
            if s.orelse is not None:
                raise Refused("a for ... else")
            for name, info in env.items():   # so the body read the values every iteration sees
                if name in before and before[name] != info:
                    if before[name] == (0, False) and info == (0, True) and name in literal \
                            and name not in self.promoted:   # ``m_i = 0.0`` updated from the row's values
                        raise _Promote(name)
                    raise Refused(f"{name} changes its rank or row dependence inside a loop")
            return
        if isinstance(s, (cst.If, cst.While)):
            if self._expr(s.test, env)[1]:
                raise Refused("a branch or loop on a row value")
            before = dict(env)
            self._block(_suite(s.body), env)
            orelse = getattr(s, "orelse", None)
            if orelse is not None:
                other = dict(before)
                body = _suite(orelse.body) if isinstance(orelse, cst.Else) else [orelse]
                self._block(body, other)
                for name in set(env) & set(other):
                    if env[name] != other[name]:
                        raise Refused(f"{name} differs between the branches")
            for name, info in env.items():
                if name in before and before[name] != info:
                    raise Refused(f"{name} changes its rank or row dependence under a branch")
            return
        raise Refused(f"statement {type(s).__name__}")

    def _small(self, small, env: dict) -> None:
        if isinstance(small, cst.Assign):
            info = self._expr(small.value, env)
            for t in small.targets:
                if not isinstance(t.target, cst.Name):
                    raise Refused("an assignment to something other than a name")
                name = t.target.value
                self.literal.discard(name)
                kind = _number_kind(small.value)
                if kind is not None and len(small.targets) == 1:
                    self.literal.add(name)
                    if name in self.promoted:
                        self.scalars[id(small.value)] = kind
                        info = (0, True)
                env[name] = info
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
            env[small.target.value] = self._expr(small.value, env)
        elif isinstance(small, cst.AugAssign):
            if not isinstance(small.target, cst.Name):
                raise Refused("an augmented assignment to something other than a name")
            name = small.target.value
            old = env.get(name) or self._expr(small.target, env)
            env[name] = self._combine([small.target, small.value], [old, self._expr(small.value, env)])
            if id(small.target) in self.expand:
                raise Refused(f"{name} would take the rows of what is added to it")
        elif isinstance(small, cst.Expr):
            self._expr(small.value, env)
        elif isinstance(small, (cst.Return, cst.Pass)):
            if isinstance(small, cst.Return) and small.value is not None:
                raise Refused("a return with a value")
        else:
            raise Refused(f"statement {type(small).__name__}")

    # -- expressions ----------------------------------------------------------------------------------------------
    def _set(self, node, info: tuple[int, bool]) -> tuple[int, bool]:
        self.info[id(node)] = info
        self.widest = max(self.widest, info[0])
        return info

    def _combine(self, nodes: list, infos: list[tuple[int, bool]]) -> tuple[int, bool]:
        """The rank and dependence of an elementwise combination; row values of lower rank are widened."""
        rank = max((r for r, _ in infos), default=0)
        dep = any(d for _, d in infos)
        for n, (r, d) in zip(nodes, infos):
            if d and r < rank:
                self.expand[id(n)] = rank - r
        return rank, dep

    def _expr(self, e, env: dict) -> tuple[int, bool]:
        if isinstance(e, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.Imaginary)):
            return self._set(e, (0, False))
        if isinstance(e, cst.Name):
            return self._set(e, env.get(e.value, (0, False)))
        if isinstance(e, cst.Attribute):   # tl.float32, x.dtype.element_ty
            base = self._expr(e.value, env) if isinstance(e.value, cst.Name) and e.value.value in env else (0, False)
            if base[1]:
                raise Refused(f"an attribute of a row value: {code_of(e)}")
            return self._set(e, (0, False))
        if isinstance(e, cst.UnaryOperation):
            return self._set(e, self._expr(e.expression, env))
        if isinstance(e, (cst.BinaryOperation, cst.BooleanOperation)):
            parts = [e.left, e.right]
            return self._set(e, self._combine(parts, [self._expr(p, env) for p in parts]))
        if isinstance(e, cst.Comparison):
            parts = [e.left] + [c.comparator for c in e.comparisons]
            return self._set(e, self._combine(parts, [self._expr(p, env) for p in parts]))
        if isinstance(e, cst.IfExp):
            if self._expr(e.test, env)[1]:
                raise Refused("a conditional expression on a row value")
            parts = [e.body, e.orelse]
            return self._set(e, self._combine(parts, [self._expr(p, env) for p in parts]))
        if isinstance(e, cst.Subscript):
            r, d = self._expr(e.value, env)
            for el in e.slice:
                s = el.slice
                ok = isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None or \
                    isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None"
                if not ok:
                    raise Refused(f"a subscript other than ':'/None: {code_of(e)}")
            if d:
                self.subs.add(id(e))
            return self._set(e, (len(e.slice), d))
        if isinstance(e, cst.Call):
            return self._set(e, self._call(e, env))
        raise Refused(f"expression {type(e).__name__}: {code_of(e)[:60]}")

    def _call(self, c: cst.Call, env: dict) -> tuple[int, bool]:
        name = dotted(c.func)
        args = [a.value for a in c.args]
        if name in ("tl.program_id", "tl.num_programs"):
            ax = _axis(c)
            if ax is None:
                raise Refused("a program axis that is not a number")
            return (0, name == "tl.program_id" and ax == self.axis)
        if name == "tl.arange":
            return (1, False)
        if name in ("tl.zeros", "tl.full"):
            shape = args[0] if args else None
            if not isinstance(shape, (cst.List, cst.Tuple)):
                raise Refused("a block shape that is not a list")
            for a in args[1:]:
                if self._expr(a, env)[1]:
                    raise Refused("a fill value that depends on the row")
            self.shapes.add(id(c))
            return (len(shape.elements), True)
        if name in REDUCTIONS:
            x = args[0]
            r, d = self._expr(x, env)
            axis = next((a.value for a in c.args if a.keyword and a.keyword.value == "axis"), None)
            if axis is None and len([a for a in c.args if a.keyword is None]) > 1:
                axis = [a for a in c.args if a.keyword is None][1].value
            keep = any(a.keyword and a.keyword.value == "keep_dims" and code_of(a.value) == "True" for a in c.args)
            if axis is None or code_of(axis) == "None":
                if d and r >= 2:
                    raise Refused("a reduction of the whole of a row value of rank 2 or more")
                if d:
                    self.reduce[id(c)] = "all1"
                return (r if keep else 0, d)
            v = code_of(axis)
            if not v.lstrip("-").isdigit():
                raise Refused("a reduction axis that is not a number")
            if d and int(v) >= 0:
                self.reduce[id(c)] = "shift"
            return (r if keep else r - 1, d)
        if name in ("tl.load", "tl.store"):
            infos = [self._expr(a, env) for a in args]
            ptr = _ptr(c)
            rank, dep = self._combine(args, infos)
            if ptr is not None and self.info.get(id(ptr), (0, False))[1]:
                self.loads[id(c)] = rank
            elif name == "tl.store":
                raise Refused("a store whose address does not depend on the row")
            return (rank, dep) if name == "tl.load" else (0, False)
        if isinstance(c.func, cst.Attribute) and not name.startswith(("tl.", "triton.", "libdevice.")):
            if c.func.attr.value != "to":   # x.to(dtype): the value's shape; other methods may reshape
                raise Refused(f"a method call: {code_of(c)[:60]}")
            for a in args:
                if self._expr(a, env)[1]:
                    raise Refused("a cast to a row value")
            return self._expr(c.func.value, env)
        if name in SCALAR_CALLS:
            infos = [self._expr(a, env) for a in args]
            if any(d for _, d in infos):
                raise Refused(f"{name} of a row value")
            return (0, False)
        if not name.startswith(("tl.", "libdevice.", "triton.language.")) and ".libdevice." not in name:
            raise Refused(f"a call of {name or code_of(c.func)} (another function: its parameters' shapes change)")
        infos = [self._expr(a, env) for a in args]
        return self._combine(args, infos)


def _suite(body) -> list:
    """The statements of an indented block, or of a one-line suite (``if x: return``)."""
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=body.body)]
    return list(body.body)


def plan(fn: cst.FunctionDef, axis: int) -> Ranks | None:
    """The ranks of ``fn`` with ``axis`` as the row axis, or None when the kernel breaks a rule."""
    try:
        r = Ranks(fn, axis)
    except (Refused, IndexError, StopIteration):
        return None
    if not r.loads or not any(id(c) in r.loads for c in calls_named(fn, "tl.store")):
        return None
    return r


def _nones(k: int) -> str:
    return ", ".join(["None"] * k)


def rows_kernel(fn: cst.FunctionDef, axis: int, ranks: Ranks) -> cst.FunctionDef:
    """``fn`` with ``TDX_BLOCK_R`` rows of program axis ``axis`` per program (the module's rules)."""
    pids = {id(c) for c in calls_named(fn, "tl.program_id") if _axis(c) == axis}
    nprog = {id(c) for c in calls_named(fn, "tl.num_programs") if _axis(c) == axis}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            k = id(original)
            out = updated
            if k in pids:
                out = cst.Name(ROWS)
            elif k in nprog:
                out = cst.Name(ROWS_N)
            elif k in ranks.subs:
                out = updated.with_changes(slice=[cst.SubscriptElement(cst.Slice(lower=None, upper=None), comma=COMMA)]
                                           + list(updated.slice))
            elif k in ranks.reduce:
                out = _reduce_axis(updated, ranks.reduce[k])
            elif k in ranks.shapes:
                args = list(updated.args)
                els = ", ".join(code_of(el.value) for el in args[0].value.elements)
                args[0] = args[0].with_changes(value=expr(f"[{BLOCK_R}, {els}]"))
                out = updated.with_changes(args=args)
            elif k in ranks.scalars:   # a scalar accumulator: one per row
                out = expr(f"tl.full([{BLOCK_R}], {code_of(updated)}, {ranks.scalars[k]})")
            elif k in ranks.loads:
                rank = ranks.loads[k]
                out = _with_row_mask(updated, 1 if dotted(updated.func) == "tl.load" else 2,
                                     ROWS_OK if rank == 0 else f"{ROWS_OK}[:, {_nones(rank)}]")
            if k in ranks.expand:
                out = expr(f"({code_of(out)})[:, {_nones(ranks.expand[k])}]")
            return out

    new = with_prelude(fn.visit(T()), [
        f"{ROWS} = tl.program_id({axis}) * {BLOCK_R} + tl.arange(0, {BLOCK_R})"
        f"  # {BLOCK_R} rows per program (was one), in front of the block's axes", f"{ROWS_OK} = {ROWS} < {ROWS_N}"])
    return add_params(add_params(new, [ROWS_N]), [BLOCK_R], constexpr=True)


def _reduce_axis(c: cst.Call, how: str) -> cst.Call:
    """The reduction over the axis after the rows: ``axis=a`` -> ``axis=a+1``; the whole of a 1-D value -> axis 1."""
    args = list(c.args)
    positional = [i for i, a in enumerate(args) if a.keyword is None]
    for i, a in enumerate(args):
        if (a.keyword and a.keyword.value == "axis") or (a.keyword is None and positional[1:2] == [i]):
            axis = int(code_of(a.value)) + 1 if how == "shift" else 1
            return c.with_changes(args=args[:i] + [a.with_changes(value=cst.Integer(str(axis)))] + args[i + 1:])
    return add_call_kwargs(c, {"axis": cst.Integer("1")})
