"""libdevice calls with a cheaper exact form: ``pow(x, 2)`` -> ``x * x`` (and 3, 4, 1).

``libdevice.pow`` (``__nv_powf``) is a general routine: log, exp and the special cases, about 20 instructions
on a non-trivial path. A small non-negative integer exponent is a product, computed with at most two roundings
(``x * x`` is correctly rounded, more accurate than powf's 1-2 ulp), and its special cases agree with pow's
(pow(nan, 2) = nan, pow(-inf, 3) = -inf, pow(-0., 3) = -0.). The product keeps the operand's dtype, as pow
does. Exponents whose cheap forms are not the same function are left alone: 0.5 (sqrt differs at -0. and
-inf), -1 (a division, rounded differently), 0 (pow(nan, 0) = 1), non-integers.

The product goes through small ``@triton.jit`` helpers (``_tdx_pow2(x)``) so that the operand expression
is evaluated once, whatever it contains.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import code_of, dotted, insert_before_function, jit_functions, parse, stmts
from tritondx.tools.evidence.triage_patterns import constant_exponent, is_pow

#: exponent -> product (x is the helper's argument)
PRODUCTS = {1: "x", 2: "x * x", 3: "x * x * x", 4: "x2 * x2"}


def _helper(n: int) -> str:
    pre = "    x2 = x * x\n" if n == 4 else ""
    return f"@triton.jit\ndef _tdx_pow{n}(x):\n{pre}    return {PRODUCTS[n]}\n"


def cheap_pow_source(source: str) -> tuple[str, dict[str, int]] | None:
    module = parse(source)
    kernels = jit_functions(module)
    counts: dict[int, int] = {}

    class T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if is_pow(dotted(original.func)):
                n = constant_exponent(ast.parse(code_of(original), mode="eval").body)
                if n is not None:
                    counts[n] = counts.get(n, 0) + 1
                    return updated.with_changes(func=cst.Name(f"_tdx_pow{n}"), args=[updated.args[0].with_changes(
                        comma=cst.MaybeSentinel.DEFAULT)])
            return updated

    new_body = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in kernels:
            s = s.visit(T())
        new_body.append(s)
    if not counts:
        return None
    out = module.with_changes(body=new_body)
    helpers = [h for n in sorted(counts) if f"def _tdx_pow{n}(" not in source for h in stmts(_helper(n))]
    first = next(s.name.value for s in out.body if isinstance(s, cst.FunctionDef) and s.name.value in kernels)
    if helpers:
        out = insert_before_function(out, first, helpers)
    return out.code, {f"pow(x, {n})": c for n, c in sorted(counts.items())}


@rewrite("cheap_math", "libdevice pow with a small integer exponent -> the product (x * x ...): exact, "
                       "a few multiplies instead of powf's log/exp path", priority=6)
def cheap_math(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("cheap_math")
    if not motivating:
        return []
    res = cheap_pow_source(ctx.spec.source)
    if res is None:
        return []
    src, counts = res
    what = ", ".join(f"{k} x{c}" for k, c in counts.items())
    return [Proposal("cheap_math", src, {"replaced": counts}, f"libdevice pow -> products: {what}",
                     [f.id for f in motivating],
                     "powf's log/exp sequence replaced by 1-3 multiplies per element: fewer instructions where the "
                     "kernel is compute- or issue-bound (memory-bound kernels see little)")]

