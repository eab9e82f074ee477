"""Which of a kernel's constexprs are tunable, read from how the kernel uses them (never from their names).

A constexpr is a **tile** when it sizes work: an extent of ``tl.arange``, the step of a ``range``/``tl.range`` loop,
a dimension of a ``tl.zeros``/``tl.full`` block, or (``count``) the trip count of a static loop. It is a **split**
when it only divides work among programs: the divisor of ``tl.cdiv(N, SPLIT)`` (each program's share of ``N``; the
launcher's grid gives ``SPLIT`` programs on that axis), sized by nothing else. It is **semantic**
when it also fixes what is computed: a ``reshape``/``view``/``split``/``join``, a static or device assert, or a
``%``/``//`` of data indices by it where no ``tl.arange`` uses it; a **flag** when it is only tested (``if FLAG:``).
Semantic and flag values are never tuned; everything else (``other``) is left alone too.

Host side, ``host_semantic`` says whether a launcher's carrier of a value is also read by an ``assert`` or a
``view``/``reshape`` (the value is part of the data layout then, e.g. a quantization group size).

Example: in ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` ``BLOCK`` is a tile; in ``x.reshape(G, GROUP)`` ``GROUP`` is
semantic; in ``if INT64_INDEX: pid = pid.to(tl.int64)`` ``INT64_INDEX`` is a flag.
"""

from __future__ import annotations

from typing import Literal

import libcst as cst

from tritondx.tools.rewrite.cst_util import constexpr_names, dotted

Role = Literal["tile", "count", "split", "semantic", "flag", "other"]

#: calls whose size arguments make a constexpr a tile: ``tl.arange(0, BLOCK)``, ``tl.zeros([BM, BN], ...)``
TILE_CALLS = ("arange", "zeros", "full", "empty", "zeros_like")
#: calls that make it semantic (the data's shape depends on it)
SEMANTIC_CALLS = ("reshape", "view", "split", "join", "static_assert", "device_assert", "broadcast_to", "trans",
                  "permute", "interleave")
#: loops whose step (or trip count) it can be
LOOP_CALLS = ("range", "tl.range", "tl.static_range", "static_range")


def _names(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            self.visit_Name_value(n.value)
            return False

        def visit_Name_value(self, v: cst.BaseExpression) -> None:
            if isinstance(v, cst.Name):
                out.add(v.value)
            else:
                v.visit(self)

    node.visit(V())
    return out


def _callee(name: str, jit: dict[str, cst.FunctionDef]) -> cst.FunctionDef | None:
    """The module's ``@triton.jit`` function a call inside a kernel names (``helper(...)``, ``mod.helper(...)``),
    never ``tl.*``/``triton.*``."""
    head = name.split(".", 1)[0]
    if head in ("tl", "triton", "libdevice", "math"):
        return None
    return jit.get(name) or jit.get(name.rsplit(".", 1)[-1])


def _bound(n: cst.Call, callee: cst.FunctionDef) -> list[tuple[cst.BaseExpression, str]]:
    """(argument expression, callee parameter) pairs of a call, positional then keyword."""
    names = [p.name.value for p in callee.params.params]
    out, i = [], 0
    for a in n.args:
        if a.star:
            return out
        if a.keyword is not None:
            out.append((a.value, a.keyword.value))
        elif i < len(names):
            out.append((a.value, names[i]))
            i += 1
    return out


def _uses(kfn: cst.FunctionDef, params: list[str], jit: dict[str, cst.FunctionDef],
          seen: tuple[str, ...]) -> dict[str, set[str]]:
    """How a function uses each of ``params``; a value it passes on to another ``@triton.jit`` function of the
    module (a device function: ``rms_matmul(..., BLOCK_M=BLOCK_M)``) takes on that function's uses of the
    parameter it binds, recursively."""
    uses: dict[str, set[str]] = {p: set() for p in params}
    name_of = kfn.name.value

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            name = dotted(n.func)
            last = name.rsplit(".", 1)[-1]
            args = [a.value for a in n.args]
            callee = _callee(name, jit) if jit else None
            if callee is not None and callee.name.value not in seen + (name_of,):
                pairs = [(a, q) for a, q in _bound(n, callee) if _names(a) & uses.keys()]
                if pairs:
                    inner = _uses(callee, [q for _, q in pairs], jit, seen + (name_of,))
                    for a, q in pairs:
                        for p in _names(a) & uses.keys():
                            uses[p] |= inner.get(q, set())
            if last == "cdiv" and len(args) == 2:   # SPLIT of ``tl.cdiv(N, SPLIT)``: a share per program
                for p in _names(args[1]) & uses.keys():
                    uses[p].add("split")
            if last in TILE_CALLS:
                sized = args[1:2] if last == "arange" else args[:1]
                for a in sized:
                    for p in _names(a) & uses.keys():
                        uses[p].add("tile")
            elif last in SEMANTIC_CALLS:
                for a in args:
                    for p in _names(a) & uses.keys():
                        uses[p].add("semantic")
            elif name in LOOP_CALLS:
                if len(args) >= 3:
                    for p in _names(args[2]) & uses.keys():
                        uses[p].add("tile")
                elif len(args) == 1:
                    for p in _names(args[0]) & uses.keys():
                        uses[p].add("count")

        def visit_If(self, n: cst.If) -> None:
            for p in _names(n.test) & uses.keys():
                uses[p].add("test")

        def visit_IfExp(self, n: cst.IfExp) -> None:
            for p in _names(n.test) & uses.keys():
                uses[p].add("test")

        def visit_Assert(self, n: cst.Assert) -> None:
            for p in _names(n.test) & uses.keys():
                uses[p].add("semantic")

        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> None:
            if isinstance(n.operator, (cst.Modulo, cst.FloorDivide)):
                for p in _names(n.right) & uses.keys():
                    uses[p].add("divides")

    kfn.body.visit(V())
    return uses


def kernel_roles(kfn: cst.FunctionDef, jit: dict[str, cst.FunctionDef] | None = None) -> dict[str, Role]:
    """constexpr name -> role, for one ``@triton.jit`` function (libcst node); with ``jit`` (the module's jit
    functions by name), what it passes to a device function counts as that function uses it."""
    roles: dict[str, Role] = {}
    for p, u in _uses(kfn, constexpr_names(kfn), jit or {}, ()).items():
        if "semantic" in u:
            roles[p] = "semantic"
        elif "tile" in u:
            roles[p] = "tile"
        elif "divides" in u:
            roles[p] = "semantic"      # indices split by it, and no block is sized by it: a layout constant
        elif "count" in u:
            roles[p] = "count"
        elif "split" in u and u <= {"split", "test"}:
            roles[p] = "split"
        elif u == {"test"}:
            roles[p] = "flag"
        else:
            roles[p] = "other"
    return roles


def callees(kfn: cst.FunctionDef, jit: dict[str, cst.FunctionDef] | None) -> list[cst.FunctionDef]:
    """``kfn`` and every ``@triton.jit`` function of the module it calls, directly or through another one."""
    out, todo = [kfn], [kfn]
    while todo and jit:
        fn = todo.pop()

        class V(cst.CSTVisitor):
            def visit_Call(self, n: cst.Call) -> None:
                c = _callee(dotted(n.func), jit)
                if c is not None and all(c is not o for o in out):
                    out.append(c)
                    todo.append(c)

        fn.body.visit(V())
    return out


def dot_operands(kfn: cst.FunctionDef, jit: dict[str, cst.FunctionDef] | None = None) -> set[str]:
    """constexprs that size a ``tl.dot`` operand (its tiles must stay >= 16 for tensor cores): every tile
    constexpr of a kernel that calls ``tl.dot``, itself or in a device function it calls (an over-approximation
    that only raises a lower bound)."""
    has_dot = False

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            nonlocal has_dot
            if dotted(n.func).rsplit(".", 1)[-1] == "dot":
                has_dot = True

    for fn in callees(kfn, jit):
        fn.body.visit(V())
    if not has_dot:
        return set()
    return {p for p, r in kernel_roles(kfn, jit).items() if r == "tile"}


def host_semantic(fn: cst.FunctionDef | None, name: str) -> str:
    """Why the launcher's local ``name`` is part of the data layout ("" when it is not): it is read by an
    ``assert`` or by a ``view``/``reshape`` of a tensor."""
    if fn is None or not name:
        return ""
    why = ""

    class V(cst.CSTVisitor):
        def visit_Assert(self, n: cst.Assert) -> None:
            nonlocal why
            if name in _names(n.test):
                why = why or f"an assert reads {name}"

        def visit_Call(self, n: cst.Call) -> None:
            nonlocal why
            last = dotted(n.func).rsplit(".", 1)[-1]
            if last in ("view", "reshape", "split", "chunk", "unflatten") and \
                    any(name in _names(a.value) for a in n.args):
                why = why or f"{last}() reads {name}"

    fn.body.visit(V())
    return why
