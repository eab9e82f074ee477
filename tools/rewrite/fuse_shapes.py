"""Kernel shapes launch fusion recognizes (``fuse_launches``): the flat elementwise prelude (``pid``, ``offs =
pid * BLOCK + tl.arange(0, BLOCK)``, ``mask = offs < n``), a body of per-element operations only, and a 2-D tile
address ``ptr + A[:, None] * s0 + B[None, :] * s1``."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.cst_util import (
    assigned_names,
    code_of,
    constexpr_names,
    dotted,
    names_in,
    param_names,
    unwrap_hints,
)


ELEMENTWISE = {
    "tl.load", "tl.store", "tl.where", "tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.erf", "tl.sigmoid", "tl.sqrt",
    "tl.sqrt_rn", "tl.rsqrt", "tl.abs", "tl.maximum", "tl.minimum", "tl.clamp", "tl.floor", "tl.ceil", "tl.cos",
    "tl.sin", "tl.fma", "tl.fdiv", "tl.div_rn", "tl.math.exp", "tl.math.exp2", "tl.math.log", "tl.math.erf",
    "tl.math.sqrt", "tl.math.rsqrt", "tl.math.abs", "float", "int", "tl.cast",
}


@dataclass
class Flat:
    fn: cst.FunctionDef
    pid: str
    offs: str
    mask: str
    bound: str          # the parameter offs is compared with
    block: str          # the constexpr
    body: list[cst.BaseStatement]   # statements after the prelude


def single_assign(st: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign):
        a = st.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
    return None


def _is_pid_expr(e: cst.BaseExpression, pid: str | None) -> bool:
    if isinstance(e, cst.Name) and e.value == pid:
        return True
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.program_id" and code_of(e.args[0].value) in ("0", "axis=0"):
        return True
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
        return _is_pid_expr(e.func.value, pid)
    return False


def flat_kernel(fn: cst.FunctionDef) -> Flat | None:
    """The flat prelude (pid, offs, mask) of a 1-D elementwise kernel, or None."""
    params = param_names(fn)
    constexprs = constexpr_names(fn)
    body = list(fn.body.body)
    pid = offs = mask = bound = block = None
    rest: list[cst.BaseStatement] = []
    for st in body:
        a = single_assign(st)
        if a and pid is None and _is_pid_expr(a[1], None):
            pid = a[0]
            continue
        if a and pid and offs is None and isinstance(unwrap_hints(a[1]), cst.BinaryOperation) and \
                isinstance(unwrap_hints(a[1]).operator, cst.Add):
            l, r = unwrap_hints(a[1]).left, unwrap_hints(a[1]).right
            for prod, ar in ((l, r), (r, l)):
                if isinstance(prod, cst.BinaryOperation) and isinstance(prod.operator, cst.Multiply) and \
                        isinstance(ar, cst.Call) and dotted(ar.func) == "tl.arange" and len(ar.args) == 2 and \
                        code_of(ar.args[0].value) == "0" and isinstance(ar.args[1].value, cst.Name):
                    b = ar.args[1].value.value
                    if b in constexprs and _is_pid_expr(prod.left, pid) and \
                            isinstance(prod.right, cst.Name) and prod.right.value == b:
                        offs, block = a[0], b
            if offs:
                continue
        if a and offs and mask is None and isinstance(a[1], cst.Comparison) and len(a[1].comparisons) == 1:
            c = a[1]
            if isinstance(c.left, cst.Name) and c.left.value == offs and \
                    isinstance(c.comparisons[0].operator, cst.LessThan) and \
                    isinstance(c.comparisons[0].comparator, cst.Name) and c.comparisons[0].comparator.value in params:
                mask, bound = a[0], c.comparisons[0].comparator.value
                continue
        rest.append(st)
    if not (pid and offs and mask):
        return None
    # pid only feeds offs; nothing reassigns the prelude names; no control flow in the body
    used = set()
    for st in rest:
        used |= names_in(st)
        if not isinstance(st, cst.SimpleStatementLine):
            return None
    if pid in used or block in used or {pid, offs, mask} & set().union(set(), *(assigned_names(s) for s in rest)):
        return None
    return Flat(fn, pid, offs, mask, bound, block, rest)


def elementwise_only(stmts: list[cst.BaseStatement]) -> bool:
    """Only per-element operations (no reductions, no shape-making calls like tl.arange/tl.zeros)."""
    for st in stmts:
        class V(cst.CSTVisitor):
            ok = True

            def visit_Call(self, n: cst.Call) -> None:
                name = dotted(n.func)
                if isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
                    return
                if name not in ELEMENTWISE:
                    V.ok = False

        st.visit(V())
        if not V.ok:
            return False
    return True


def tile_offset(addr: cst.BaseExpression, ptr: str) -> tuple[cst.BaseExpression, str, str | None] | None:
    """``ptr + A[:, None] * s0 + B[None, :] * s1`` -> (offset expression, s0, s1 or None for unit stride)."""
    terms: list[cst.BaseExpression] = []

    def flatten(e):
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and not e.lpar:
            flatten(e.left)
            flatten(e.right)
        else:
            terms.append(e)

    flatten(addr)
    if not terms or not (isinstance(terms[0], cst.Name) and terms[0].value == ptr) or len(terms) != 3:
        return None
    rows, cols = terms[1], terms[2]

    def split(t, want):
        """A[want] * s  or  A[want] -> (s or None)."""
        if isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            if _is_bcast(t.left, want) and isinstance(t.right, cst.Name):
                return True, t.right.value
            if _is_bcast(t.right, want) and isinstance(t.left, cst.Name):
                return True, t.left.value
            return False, None
        return _is_bcast(t, want), None

    ok_r, s0 = split(rows, (":", "None"))
    ok_c, s1 = split(cols, ("None", ":"))
    if not ok_r or not ok_c or s0 is None:
        return None
    offset = cst.BinaryOperation(left=rows, operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                                             whitespace_after=cst.SimpleWhitespace(" ")), right=cols)
    return offset, s0, s1


def _is_bcast(e: cst.BaseExpression, pattern: tuple[str, str]) -> bool:
    if not isinstance(e, cst.Subscript) or len(e.slice) != 2:
        return False
    for el, want in zip(e.slice, pattern):
        s = el.slice
        if want == ":" and not (isinstance(s, cst.Slice) and s.lower is None and s.upper is None):
            return False
        if want == "None" and not (isinstance(s, cst.Index) and code_of(s.value) == "None"):
            return False
    return True
