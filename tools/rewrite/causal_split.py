"""Causal masks only on the diagonal tiles: the key loop of an attention-like kernel split in two.

A kernel whose loop ``for s in range(lo, hi, BN)`` masks every tile with
``tl.where(rows[:, None] >= (s + cols[None, :]), x, fill)`` (rows = ``A * BM + tl.arange(0, BM)``, cols =
``tl.arange(0, BN)``) pays for the mask on tiles that lie wholly below the diagonal, where it is all true.
The tile starting at ``s`` is all true when ``s + BN - 1 <= A * BM`` (``<`` for a strict ``>``), so with
``split = lo + (A * BM - lo + 1) // BN * BN`` the loop becomes

    for s in range(lo, tl.minimum(split, hi), BN):     # off-diagonal: the where is its value, x
        ...
    for s in range(tl.maximum(tl.minimum(split, hi), lo), hi, BN):   # diagonal tiles: masked as before
        ...

Loop-carried values (accumulators, pointers advanced with ``+=`` / ``tl.advance``) flow from the first
loop into the second exactly as between iterations. ``//`` truncates in Triton; for a negative numerator
the split only moves below ``lo``, which the clamps absorb. Applies when the loop sits at the kernel's top
level, the row offsets are assigned once before it from names the loop does not change, and the mask is
the first argument of a ``tl.where``.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    assigned_names,
    calls_named,
    code_of,
    dotted,
    expr,
    jit_functions,
    names_in,
    paren,
    parse,
    replace_functions,
    replace_nodes,
    stmt,
)

SPLIT = "_tdx_diag_start"


def _arange_of(e: cst.BaseExpression) -> str | None:
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.arange" and len(e.args) == 2 and \
            code_of(e.args[0].value) == "0":
        return code_of(e.args[1].value)
    return None


def _subscript(e: cst.BaseExpression, pattern: str) -> cst.BaseExpression | None:
    """``x[:, None]`` -> x for pattern ':, None' (and ``x[None, :]`` for 'None, :')."""
    if isinstance(e, cst.Subscript) and code_of(e).replace(" ", "").endswith(f"[{pattern.replace(' ', '')}]"):
        return e.value
    return None


def _row_start(body: list, loop_index: int, name: str) -> tuple[str, str] | None:
    """(first row, BM) of ``name = A * BM + tl.arange(0, BM)`` assigned last before the loop."""
    for st in reversed(body[:loop_index]):
        if not isinstance(st, cst.SimpleStatementLine):
            if name in assigned_names(st):
                return None
            continue
        for sm in st.body:
            if isinstance(sm, cst.Assign) and any(code_of(t.target) == name for t in sm.targets):
                v = sm.value
                if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
                    for a, b in ((v.left, v.right), (v.right, v.left)):
                        bm = _arange_of(b)
                        if bm and isinstance(a, cst.BinaryOperation) and isinstance(a.operator, cst.Multiply) \
                                and code_of(a.right) == bm:
                            return code_of(a), bm
                return None
    return None


def _causal(c: cst.BaseExpression, loop_var: str, offs_n: set[str]) -> tuple[str, bool] | None:
    """(row name, strict) for ``R[:, None] >= (s + n[None, :])`` and its mirror ``(s + n[None, :]) <= R[:, None]``."""
    c = c.with_changes(lpar=[], rpar=[]) if isinstance(c, cst.Comparison) else c
    if not (isinstance(c, cst.Comparison) and len(c.comparisons) == 1):
        return None
    op = c.comparisons[0].operator
    left, right = c.left, c.comparisons[0].comparator
    if isinstance(op, (cst.LessThanEqual, cst.LessThan)):
        left, right = right, left
        strict = isinstance(op, cst.LessThan)
    elif isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan)):
        strict = isinstance(op, cst.GreaterThan)
    else:
        return None
    row = _subscript(left, ":, None")
    if not isinstance(row, cst.Name):
        return None
    col = right.with_changes(lpar=[], rpar=[])
    inner = _subscript(col, "None, :")
    if inner is not None:   # (s + n)[None, :]
        col = inner.with_changes(lpar=[], rpar=[])
    if not (isinstance(col, cst.BinaryOperation) and isinstance(col.operator, cst.Add)):
        return None
    parts = {code_of(col.left).replace(" ", ""), code_of(col.right).replace(" ", "")}
    n_ok = any(p in offs_n or (p.endswith("[None,:]") and p[:-len("[None,:]")] in offs_n) for p in parts)
    return (row.value, strict) if loop_var in parts and n_ok else None


def split_kernel(fn: cst.FunctionDef) -> tuple[cst.FunctionDef, str] | None:
    body = list(fn.body.body)
    for i, lp in enumerate(body):
        if not (isinstance(lp, cst.For) and isinstance(lp.target, cst.Name) and isinstance(lp.iter, cst.Call)
                and dotted(lp.iter.func) in ("range", "tl.range")):
            continue
        args = [a.value for a in lp.iter.args if a.keyword is None]
        if len(args) != 3 or len(args) != len(lp.iter.args):
            continue
        lo, hi, bn = args
        s = lp.target.value
        offs_n = {t for st in body[:i] if isinstance(st, cst.SimpleStatementLine) for sm in st.body
                  if isinstance(sm, cst.Assign) and _arange_of(sm.value) == code_of(bn)
                  for t in (code_of(x.target) for x in sm.targets)}
        changed = assigned_names(lp.body)
        wheres = []
        for w in calls_named(lp.body, "tl.where"):
            if len(w.args) != 3 or any(a.keyword for a in w.args):
                continue
            hit = _causal(w.args[0].value, s, offs_n - changed)
            if hit:
                wheres.append((w, hit))
        if not wheres or len({h for _, h in wheres}) != 1:
            continue
        row, strict = wheres[0][1]
        start = _row_start(body, i, row)
        if start is None or row in changed or names_in(expr(start[0])) & changed:
            continue
        m0 = start[0]
        plus = "" if strict else " + 1"
        split = stmt(f"{SPLIT} = {code_of(paren(lo))} + ({m0} - {code_of(paren(lo))}{plus}) // {code_of(bn)} "
                     f"* {code_of(bn)}  # first key tile that crosses the diagonal")
        off_body = replace_nodes(lp.body, {id(w): w.args[1].value for w, _ in wheres})
        end = f"tl.minimum({SPLIT}, {code_of(hi)})"
        off = lp.with_changes(iter=expr(f"range({code_of(lo)}, {end}, {code_of(bn)})"), body=off_body)
        diag = lp.with_changes(iter=expr(f"range(tl.maximum({end}, {code_of(lo)}), {code_of(hi)}, {code_of(bn)})"),
                               leading_lines=[])
        new_body = body[:i] + [split, off, diag] + body[i + 1:]
        return fn.with_changes(body=fn.body.with_changes(body=new_body)), f"loop over {s} split at the diagonal " \
            f"(rows from {m0}, {'>' if strict else '>='})"
    return None


def causal_source(source: str, kernels: set[str] | None = None) -> tuple[str, dict[str, str]] | None:
    module = parse(source)
    done, new = {}, {}
    for name, fn in jit_functions(module).items():
        if (kernels is not None and name not in kernels) or SPLIT in code_of(fn):
            continue
        r = split_kernel(fn)
        if r:
            new[name], done[name] = r
    if not done:
        return None
    return replace_functions(module, new).code, done


@rewrite("causal_split", "causal mask applied to every key tile -> an unmasked loop over the off-diagonal "
                         "tiles and a masked loop over the diagonal ones", priority=9)
def causal_split(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("causal_split")
    if not motivating:
        return []
    kernels = {f.kernel for f in motivating}
    res = causal_source(ctx.spec.source, None if None in kernels else kernels)
    if res is None:
        return []
    src, done = res
    return [Proposal("causal_split", src, {"kernels": done}, "; ".join(f"{k}: {v}" for k, v in done.items()),
                     [f.id for f in motivating],
                     "no compare/select on the tiles below the diagonal (most of them for long sequences): fewer "
                     "instructions per tile in the softmax part of the loop")]
