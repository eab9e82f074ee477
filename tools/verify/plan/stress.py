"""Value ranges that stress a kernel's numerics, chosen from what the original kernels compute.

A reduction with ``exp`` (softmax, logsumexp, attention) is checked with large magnitudes: a
softmax without its max pass overflows (``exp(1000)``) where the reference stays finite. A kernel
that takes a square root of a reduction (a norm) is checked with tiny and huge scales: a missing or
misplaced epsilon, or ``E[x^2] - E[x]^2`` in low precision, shows there. Other reductions get large
values, and so does every other kernel: inputs drawn with ``randn`` stay within about +-5, so a candidate
that is right only there (``tl.where(tl.abs(x) < 6, ...)`` on an elementwise kernel was accepted before)
shows on inputs x100. The stress is applied to every floating-point input after ``make_inputs`` by the trusted
side (a scale in place) and only where the reference stays finite on the stressed inputs. The judge compares a
stressed case with the task's rtol and its atol scaled by how much the reference's outputs grew under the stress
(``case_data.CaseData._atol_scales``): a sum's rounding error grows with its terms, a softmax's does not.
"""

from __future__ import annotations

import ast

import torch

from tritondx.tools.verify.plan.evaluator import dotted

#: values -> the factor floating inputs are multiplied by
SCALES = {"large": 100.0, "tiny": 1e-3, "huge": 1e3}

_REDUCE = {"max", "min", "sum", "reduce", "cumsum", "cumprod", "argmax", "argmin", "xor_sum", "associative_scan"}
_EXP = {"exp", "exp2", "log", "log2", "softmax", "logsumexp"}
_ROOT = {"sqrt", "rsqrt", "sqrt_rn", "div_rn"}


def _kernel_calls(tree: ast.Module) -> set[str]:
    """Last parts of the ``tl.*`` / ``libdevice.*`` calls inside @triton.jit functions."""
    from tritondx.tools.verify.plan.branches import is_kernel
    names: set[str] = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and is_kernel(fn):
            for n in ast.walk(fn):
                if isinstance(n, ast.Call):
                    name = dotted(n.func) or (n.func.attr if isinstance(n.func, ast.Attribute) else "")
                    if name:
                        names.add(name.rsplit(".", 1)[-1])
    return names


def stress_kinds(original_source: str) -> list[tuple[str, str]]:
    """[(values, why)] for the original's kernels: reduction-like kernels get stressed magnitudes."""
    try:
        calls = _kernel_calls(ast.parse(original_source))
    except SyntaxError:
        return []
    reduce, exp, root = calls & _REDUCE, calls & _EXP, calls & _ROOT
    out: list[tuple[str, str]] = []
    if exp and reduce:
        out.append(("large", f"reduction with {sorted(exp)[0]} ({sorted(reduce)[0]}): inputs x{SCALES['large']:g} "
                             "(an unshifted exp overflows)"))
    elif reduce:
        out.append(("large", f"reduction ({sorted(reduce)[0]}): inputs x{SCALES['large']:g}"))
    if root and reduce:
        why = f"norm-like ({sorted(root)[0]} of a {sorted(reduce)[0]})"
        out.append(("tiny", f"{why}: inputs x{SCALES['tiny']:g} (epsilon placement)"))
        out.append(("huge", f"{why}: inputs x{SCALES['huge']:g} (overflow of squares)"))
    if not out and calls:
        out.append(("large", f"inputs x{SCALES['large']:g}: beyond the range of the listed cases' draws"))
    return out


def apply_values(inputs: tuple, values: str) -> tuple:
    """Scale every floating-point tensor input in place by the factor of ``values`` ("normal": unchanged)."""
    factor = SCALES.get(values)
    if factor is None:
        return inputs
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t.mul_(factor)
    return inputs


def all_finite(ts: tuple) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in ts if isinstance(t, torch.Tensor) and t.is_floating_point())
