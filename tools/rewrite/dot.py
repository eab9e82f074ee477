"""Multiply-and-sum written by hand -> ``tl.dot`` on the native operands with an fp32 accumulator.

Matches, inside a ``@triton.jit`` function::

    acc += tl.sum(A[:, :, None] * B[None, :, :], axis=1)

where A and B may be wrapped in ``.to(tl.float32)``; produces ``acc = tl.dot(A0, B0, acc)`` with the
casts removed (16-bit operands go to the tensor cores as they are: their products are exact in fp32) and, for
fp32 operands, ``input_precision="ieee"``: an fp32 product stays an fp32 product (never tf32, whatever the
tolerance would let through; issue 37: a rewrite keeps the kernel's precision semantics).
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    dotted,
    parse,
)
from tritondx.tools.rewrite.launch_values import (
    current_launch_values,
    set_launch_values,
)
from tritondx.tools.rewrite.launch_config import MATMUL_SPACE, _matmul_params


def _strip_cast(expr: cst.BaseExpression) -> cst.BaseExpression:
    # X.to(tl.float32) -> X
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "to" \
            and len(expr.args) == 1 and dotted(expr.args[0].value) == "tl.float32":
        return expr.func.value
    return expr


def _broadcast_base(expr: cst.BaseExpression, pattern: tuple[str, ...]) -> cst.BaseExpression | None:
    """``X[:, :, None]`` -> X when the subscript matches ``pattern`` (':' or 'None' per slot)."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != len(pattern):
        return None
    for el, want in zip(expr.slice, pattern):
        s = el.slice
        if want == ":" and not (isinstance(s, cst.Slice) and s.lower is None and s.upper is None):
            return None
        if want == "None" and not (isinstance(s, cst.Index) and isinstance(s.value, cst.Name)
                                   and s.value.value == "None"):
            return None
    return expr.value


def _match_mul_sum(call: cst.BaseExpression):
    if not (isinstance(call, cst.Call) and dotted(call.func) == "tl.sum"):
        return None
    axis = next((a.value for a in call.args if a.keyword and a.keyword.value == "axis"), None)
    if axis is None and len(call.args) > 1:
        axis = call.args[1].value
    if not (isinstance(axis, cst.Integer) and axis.value == "1"):
        return None
    prod = call.args[0].value
    if not (isinstance(prod, cst.BinaryOperation) and isinstance(prod.operator, cst.Multiply)):
        return None
    a = _broadcast_base(prod.left, (":", ":", "None"))
    b = _broadcast_base(prod.right, ("None", ":", ":"))
    if a is None or b is None:
        return None
    return a, b


class MulSumToDot(cst.CSTTransformer):
    def __init__(self, precision: str | None):
        self.precision = precision
        self.count = 0

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign):
        if not isinstance(updated.operator, cst.AddAssign):
            return updated
        match = _match_mul_sum(updated.value)
        if not match:
            return updated
        a, b = (_strip_cast(x) for x in match)
        args = [cst.Arg(a), cst.Arg(b), cst.Arg(updated.target)]
        if self.precision:
            args.append(cst.Arg(keyword=cst.Name("input_precision"), value=cst.SimpleString(f'"{self.precision}"'),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        self.count += 1
        return cst.Assign(targets=[cst.AssignTarget(updated.target)],
                          value=cst.Call(func=cst.parse_expression("tl.dot"), args=args))


def to_dot(source: str, precision: str | None) -> tuple[str, int]:
    t = MulSumToDot(precision)
    out = parse(source).visit(t)
    return out.code, t.count


@rewrite("tl_dot", "multiply-and-sum products turned into tl.dot on native operands (tensor cores)", priority=10)
def tl_dot(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("tl_dot")
    if not motivating:
        return []
    # the products were fp32 multiplies: they stay fp32 (ieee), whatever the tolerance would let through; only
    # operands that were 16-bit before an fp32 cast go to the tensor cores as they are (their products are exact)
    fp32 = any(d == "float32" for d in ctx.dtypes)
    precision = "ieee" if fp32 else None
    source, n = to_dot(ctx.spec.source, precision)
    if n == 0:
        return []
    kernels = {k.name: k.constexpr_params for k in ctx.spec.kernels}
    current = current_launch_values(source, set(kernels), kernels)
    # tl.dot needs every tile dimension >= 16: keep the tiles only when they already are
    tiles_ok = all(v >= 16 for vals in current.values() for p, v in vals.items() if "BLOCK" in p.upper())
    proposals = [] if not tiles_ok else [Proposal("tl_dot", source, {"products": n, "precision": precision or "native", "tiles": "kept"},
                          f"{n} multiply-and-sum product(s) -> tl.dot (precision {precision or 'native 16-bit'})",
                          [f.id for f in motivating],
                          "products move from CUDA-core FMA / upcast tf32 to 16-bit tensor cores")]
    for bm, bn, bk, w, s in MATMUL_SPACE[:2]:
        values = {}
        for kname, vals in current.items():
            mm = _matmul_params(list(vals))
            if mm:
                values[kname] = {mm["M"]: bm, mm["N"]: bn, mm["K"]: bk, "num_warps": w, "num_stages": s}
        if values:
            tiled = set_launch_values(source, values)
            proposals.append(Proposal("tl_dot", tiled, {"products": n, "precision": precision or "native",
                                                        "tiles": [bm, bn, bk, w, s]},
                                      f"{n} product(s) -> tl.dot with {bm}x{bn}x{bk} tiles, {w} warps, {s} stages",
                                      [f.id for f in motivating],
                                      "tensor cores with tiles large enough for Hopper wgmma (M >= 64 per warpgroup)"))
    return proposals
