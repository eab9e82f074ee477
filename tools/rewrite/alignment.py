"""Alignment and contiguity hints on block offsets.

``offs = X * B + tl.arange(0, B)`` (X any integer, e.g. the program id) and ``cols = s + tl.arange(0, B)``
inside ``for s in range(0 | Y * B, hi, B)`` start on a multiple of B and run B contiguous values, so
``offs = tl.max_contiguous(tl.multiple_of(offs, B), B)`` states a fact (the Triton tutorial's form;
the divisibility applies to the first element of each contiguous group). The compiler's axis analysis
usually derives this itself; the hint matters where it cannot (offsets passed through casts,
``pid.to(tl.int64)``, loop-carried starts) and the IR shows narrow accesses.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    parse,
)


def _arange_block(e: cst.BaseExpression, consts: list[str]) -> str | None:
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.arange" and len(e.args) == 2 and \
            code_of(e.args[0].value) == "0" and isinstance(e.args[1].value, cst.Name) and \
            e.args[1].value.value in consts:
        return e.args[1].value.value
    return None


def _multiple_of(e: cst.BaseExpression, block: str) -> bool:
    """``X * B`` / ``B * X`` (possibly X.to(...) * B)."""
    return isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply) and \
        block in (code_of(e.left), code_of(e.right))


class Hints(cst.CSTTransformer):
    def __init__(self, consts: list[str]):
        self.consts = consts
        self.loops: list[tuple[str, str] | None] = []   # (loop var, step constexpr) when the start is aligned
        self.count = 0

    def visit_For(self, n: cst.For) -> None:
        info = None
        it = n.iter
        if isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and isinstance(n.target, cst.Name):
            args = [a.value for a in it.args if a.keyword is None]
            if len(args) == 3 and isinstance(args[2], cst.Name) and args[2].value in self.consts and \
                    (code_of(args[0]) == "0" or _multiple_of(args[0], args[2].value)):
                info = (n.target.value, args[2].value)
        self.loops.append(info)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        self.loops.pop()
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        v = updated.value
        if not (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add)):
            return updated
        for a, b in ((v.left, v.right), (v.right, v.left)):
            blk = _arange_block(b, self.consts)
            if blk is None:
                continue
            aligned = _multiple_of(a, blk)
            loop = next((lp for lp in reversed(self.loops) if lp and isinstance(a, cst.Name) and lp[0] == a.value),
                        None)
            if not aligned and loop and loop[1] == blk:
                aligned = True
            if aligned:
                self.count += 1
                return updated.with_changes(
                    value=expr(f"tl.max_contiguous(tl.multiple_of({code_of(v)}, {blk}), {blk})"))
        return updated


def hint_source(source: str) -> tuple[str, int]:
    module = parse(source)
    kernels = jit_functions(module)
    total = 0
    new = {}
    for name, fn in kernels.items():
        t = Hints(constexpr_names(fn))
        out = fn.visit(t)
        if t.count:
            new[name] = out
            total += t.count
    if not total:
        return source, 0
    module = module.with_changes(body=[new.get(s.name.value, s) if isinstance(s, cst.FunctionDef) else s
                                       for s in module.body])
    return module.code, total


@rewrite("alignment_hints", "tl.multiple_of / tl.max_contiguous on block offsets that start on a block multiple",
         priority=45)
def alignment_hints(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("alignment_hints")
    if not motivating:
        return []
    source, n = hint_source(ctx.spec.source)
    if n == 0:
        return []
    return [Proposal("alignment_hints", source, {"hinted_offsets": n},
                     f"{n} block offset(s) declared contiguous and block-aligned", [f.id for f in motivating],
                     "lets the coalescer give each thread 16-byte vector accesses where the axis analysis lost "
                     "alignment; no change where the compiler already proved it (check the PTX widths)")]
