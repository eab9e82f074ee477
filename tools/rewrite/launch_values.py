"""The int values of the kernel calls in the host functions (``launch()`` and the helpers that launch: constexprs,
``num_warps``, ``num_stages``) where they are written as literals, or as locals assigned a literal in the function
that makes the call: read (``current_launch_values``) and set (``set_launch_values``)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.cst_util import dotted, parse
from tritondx.tools.rewrite.launch_sites import host_functions


@dataclass
class KernelCall:
    kernel: str
    keywords: dict[str, cst.BaseExpression]


def calls_in(fn: cst.FunctionDef, kernel_names: set[str]) -> list[KernelCall]:
    """The ``kernel[grid](...)`` calls of ``kernel_names`` in one function."""
    out: list[KernelCall] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Subscript) and dotted(node.func.value) in kernel_names:
                out.append(KernelCall(dotted(node.func.value),
                                      {a.keyword.value: a.value for a in node.args if a.keyword}))

    fn.visit(V())
    return out


def int_assignments(fn: cst.FunctionDef) -> dict[str, int]:
    """``NAME = 128`` and ``A, B = 32, 64`` assignments in a function body (top level of it)."""
    found: dict[str, int] = {}

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                tgt, val = t.target, node.value
                if isinstance(tgt, cst.Name) and isinstance(val, cst.Integer):
                    found[tgt.value] = int(val.value)
                elif isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple):
                    for te, ve in zip(tgt.elements, val.elements):
                        if isinstance(te.value, cst.Name) and isinstance(ve.value, cst.Integer):
                            found[te.value.value] = int(ve.value.value)

    fn.visit(V())
    return found


class SetLaunchValues(cst.CSTTransformer):
    """Set constexpr / launch option values of the kernel calls, in the function that makes each call.

    ``values`` maps kernel -> {param: int}. A keyword whose value is a literal is replaced; one whose
    value is a local name assigned an int literal in that function has that assignment replaced; a
    missing launch option (num_warps, num_stages) is added as a keyword.
    """

    OPTIONS = ("num_warps", "num_stages")

    def __init__(self, values: dict[str, dict[str, int]]):
        self.values = values
        #: per function being visited: whether it calls a kernel of ``values``, and its locals to set
        self.frames: list[tuple[bool, dict[str, int]]] = []
        self.applied: set[tuple[str, str]] = set()

    @property
    def in_launch(self) -> bool:
        return bool(self.frames) and self.frames[-1][0]

    @property
    def rename(self) -> dict[str, int]:
        return self.frames[-1][1] if self.frames else {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        calls = calls_in(node, set(self.values))
        rename: dict[str, int] = {}
        if calls:
            assigned = int_assignments(node)
            for call in calls:
                for p, v in self.values[call.kernel].items():
                    expr = call.keywords.get(p)
                    if isinstance(expr, cst.Name) and expr.value in assigned:
                        rename[expr.value] = v
        self.frames.append((bool(calls), rename))
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.frames.pop()
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if not self.in_launch:
            return updated
        t = updated.targets[0].target if len(updated.targets) == 1 else None
        if isinstance(t, cst.Name) and t.value in self.rename and isinstance(updated.value, cst.Integer):
            return updated.with_changes(value=cst.Integer(str(self.rename[t.value])))
        if isinstance(t, cst.Tuple) and isinstance(updated.value, cst.Tuple):
            elems = list(updated.value.elements)
            for i, te in enumerate(t.elements):
                if isinstance(te.value, cst.Name) and te.value.value in self.rename and \
                        isinstance(elems[i].value, cst.Integer):
                    elems[i] = elems[i].with_changes(value=cst.Integer(str(self.rename[te.value.value])))
            return updated.with_changes(value=updated.value.with_changes(elements=elems))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not self.in_launch or not isinstance(updated.func, cst.Subscript):
            return updated
        name = dotted(updated.func.value)
        if name not in self.values:
            return updated
        params = self.values[name]
        args = list(updated.args)
        present = {a.keyword.value for a in args if a.keyword}
        for i, a in enumerate(args):
            if a.keyword and a.keyword.value in params and isinstance(a.value, cst.Integer):
                args[i] = a.with_changes(value=cst.Integer(str(params[a.keyword.value])))
        for opt in self.OPTIONS:
            if opt in params and opt not in present:
                if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(keyword=cst.Name(opt), value=cst.Integer(str(params[opt])),
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        return updated.with_changes(args=args)


def set_launch_values(source: str, values: dict[str, dict[str, int]]) -> str:
    return parse(source).visit(SetLaunchValues(values)).code


def current_launch_values(source: str, kernel_names: set[str], constexprs: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    """The int values each kernel call gets for its constexprs and launch options (where literal)."""
    module = parse(source)
    out: dict[str, dict[str, int]] = {}
    for fn in host_functions(module):
        assigned = int_assignments(fn)
        for call in calls_in(fn, kernel_names):
            vals = out.setdefault(call.kernel, {})
            for p in list(constexprs.get(call.kernel, [])) + list(SetLaunchValues.OPTIONS):
                expr = call.keywords.get(p)
                if isinstance(expr, cst.Integer):
                    vals[p] = int(expr.value)
                elif isinstance(expr, cst.Name) and expr.value in assigned:
                    vals[p] = assigned[expr.value]
    return out
