"""libcst helpers shared by the rewrites: find the launcher's kernel calls and edit their settings."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst
import libcst.matchers as m


@lru_cache(maxsize=128)
def parse(source: str) -> cst.Module:
    """Parse once per distinct source (CST nodes are immutable, so sharing the tree is safe)."""
    return cst.parse_module(source)


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def function(module: cst.Module, name: str) -> cst.FunctionDef | None:
    return next((s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


@dataclass
class KernelCall:
    kernel: str
    keywords: dict[str, cst.BaseExpression]


def kernel_calls(module: cst.Module, kernel_names: set[str]) -> list[KernelCall]:
    launch = function(module, "launch")
    if launch is None:
        return []
    out: list[KernelCall] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Subscript) and dotted(node.func.value) in kernel_names:
                out.append(KernelCall(dotted(node.func.value),
                                      {a.keyword.value: a.value for a in node.args if a.keyword}))

    launch.visit(V())
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
    """Set constexpr / launch option values of the kernel calls in ``launch``.

    ``values`` maps kernel -> {param: int}. A keyword whose value is a literal is replaced; one whose
    value is a local name assigned an int literal in ``launch`` has that assignment replaced; a
    missing launch option (num_warps, num_stages) is added as a keyword.
    """

    OPTIONS = ("num_warps", "num_stages")

    def __init__(self, values: dict[str, dict[str, int]]):
        self.values = values
        self.in_launch = False
        self.rename: dict[str, int] = {}
        self.applied: set[tuple[str, str]] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node.name.value == "launch":
            self.in_launch = True
            assigned = int_assignments(node)
            for kc_name, params in self.values.items():
                for call in kernel_calls(cst.Module(body=[node]), {kc_name}):
                    for p, v in params.items():
                        expr = call.keywords.get(p)
                        if isinstance(expr, cst.Name) and expr.value in assigned:
                            self.rename[expr.value] = v
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original.name.value == "launch":
            self.in_launch = False
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
    launch = function(module, "launch")
    if launch is None:
        return {}
    assigned = int_assignments(launch)
    out: dict[str, dict[str, int]] = {}
    for call in kernel_calls(module, kernel_names):
        vals = out.setdefault(call.kernel, {})
        for p in list(constexprs.get(call.kernel, [])) + list(SetLaunchValues.OPTIONS):
            expr = call.keywords.get(p)
            if isinstance(expr, cst.Integer):
                vals[p] = int(expr.value)
            elif isinstance(expr, cst.Name) and expr.value in assigned:
                vals[p] = assigned[expr.value]
    return out


def has_matcher(node: cst.CSTNode, matcher) -> bool:
    return bool(m.findall(node, matcher))


# ---------------------------------------------------------------------------------------------
# Kernels, launch sites and expression surgery shared by the structural rewrites
# ---------------------------------------------------------------------------------------------

def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def stmts(code: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(code).body)


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def is_atom(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Attribute, cst.Call,
                             cst.Subscript)) or bool(getattr(node, "lpar", None))


def paren(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` wrapped in parentheses unless it binds tighter than any operator already."""
    if is_atom(node):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def unwrap_hints(e: cst.BaseExpression) -> cst.BaseExpression:
    """``tl.max_contiguous(tl.multiple_of(x, B), B)`` -> x (hints do not change values)."""
    while isinstance(e, cst.Call) and dotted(e.func) in ("tl.max_contiguous", "tl.multiple_of") and e.args:
        e = e.args[0].value
    return e


def is_jit(fn: cst.FunctionDef) -> bool:
    for d in fn.decorators:
        target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if dotted(target).endswith("jit"):
            return True
    return False


def jit_functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and is_jit(s)}


def param_names(fn: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in fn.params.params]


def constexpr_names(fn: cst.FunctionDef) -> list[str]:
    out = []
    for p in fn.params.params:
        if p.annotation is not None and "constexpr" in code_of(p.annotation.annotation):
            out.append(p.name.value)
    return out


class NameSubst(cst.CSTTransformer):
    """Replace names by expressions (parenthesized where needed) in expression positions.

    Keyword names of calls, attribute names and parameter names are never touched; assignment
    targets are renamed only when the replacement is itself a Name and ``targets`` is true.
    """

    def __init__(self, mapping: dict[str, cst.BaseExpression], targets: bool = False):
        self.mapping = mapping
        self.targets = targets

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        rep = self.mapping.get(original.value)
        if rep is None:
            return updated
        return paren(rep) if not isinstance(rep, cst.Name) else rep

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        return updated.with_changes(name=original.name)

    def leave_AssignTarget(self, original: cst.AssignTarget, updated: cst.AssignTarget) -> cst.AssignTarget:
        if self.targets:
            return updated
        return updated.with_changes(target=original.target)

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign) -> cst.AugAssign:
        if self.targets:
            return updated
        return updated.with_changes(target=original.target)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        if self.targets:
            return updated
        return updated.with_changes(target=original.target)


def subst(node, mapping: dict[str, cst.BaseExpression], targets: bool = False):
    if not mapping:
        return node
    return node.visit(NameSubst(mapping, targets))


def rename(node, mapping: dict[str, str]):
    """Rename names everywhere (targets included): for moving a body into another function."""
    return subst(node, {k: cst.Name(v) for k, v in mapping.items()}, targets=True)


_CACHE: OrderedDict[tuple[str, int], tuple[cst.CSTNode, object]] = OrderedDict()


def _cached(kind: str, node: cst.CSTNode, compute):
    """Memoize an analysis of an (immutable) node; the entry keeps the node alive so its id stays unique."""
    key = (kind, id(node))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is node:
        _CACHE.move_to_end(key)
        return hit[1]
    value = compute(node)
    _CACHE[key] = (node, value)
    if len(_CACHE) > 4096:
        _CACHE.popitem(last=False)
    return value


def _names_in(node: cst.CSTNode) -> frozenset[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return frozenset(found)


def names_in(node: cst.CSTNode) -> set[str]:
    """Names read or written in a node (keywords and attribute names excluded)."""
    return set(_cached("names", node, _names_in))


def assigned_names(node: cst.CSTNode) -> set[str]:
    """Names bound by assignments, aug-assignments and for targets inside ``node``."""
    found: set[str] = set()

    def targets_of(t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            found.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for e in t.elements:
                targets_of(e.value)

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            targets_of(n.target)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            targets_of(n.target)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            targets_of(n.target)

        def visit_For(self, n: cst.For) -> None:
            targets_of(n.target)

    node.visit(V())
    return found


def _calls_index(node: cst.CSTNode) -> dict[str, list[cst.Call]]:
    idx: dict[str, list[cst.Call]] = {}

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            idx.setdefault(dotted(n.func), []).append(n)

    node.visit(V())
    return idx


def calls_named(node: cst.CSTNode, name: str) -> list[cst.Call]:
    """Calls of ``name`` (dotted) inside ``node``, in source order."""
    return list(_cached("calls", node, _calls_index).get(name, []))


def kwarg(call: cst.Call, name: str, pos: int | None = None) -> cst.BaseExpression | None:
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    if pos is not None:
        positional = [a for a in call.args if a.keyword is None]
        if pos < len(positional):
            return positional[pos].value
    return None


def make_arg(value: cst.BaseExpression, keyword: str | None = None) -> cst.Arg:
    if keyword is None:
        return cst.Arg(value=value)
    return cst.Arg(keyword=cst.Name(keyword), value=value,
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def with_args(call: cst.Call, args: list[cst.Arg]) -> cst.Call:
    """``call`` with ``args`` and clean commas between them."""
    fixed = []
    for i, a in enumerate(args):
        last = i == len(args) - 1
        if last:
            a = a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif a.comma is cst.MaybeSentinel.DEFAULT:
            a = a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        fixed.append(a)
    return call.with_changes(args=fixed)


def int_value(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    return None


@dataclass
class LaunchSite:
    """One ``kernel[grid](...)`` call in launch(), with its arguments bound to the kernel's parameters."""

    kernel: str
    call: cst.Call
    grid: cst.BaseExpression
    bound: dict[str, cst.BaseExpression]     # kernel parameter -> argument expression
    options: dict[str, cst.BaseExpression]   # num_warps, num_stages, ... -> expression
    top_level: bool                          # the call is a statement directly in launch's body
    index: int                               # statement index in launch's body (of the enclosing stmt)


LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


def launch_sites(module: cst.Module) -> list[LaunchSite]:
    """Kernel launches in launch(), in source order."""
    return list(_cached("sites", module, _launch_sites))


def _launch_sites(module: cst.Module) -> list[LaunchSite]:
    launch = function(module, "launch")
    if launch is None:
        return []
    return function_launch_sites(launch, jit_functions(module))


def bind_launch(call: cst.Call, params: list[str]
                ) -> tuple[dict[str, cst.BaseExpression], dict[str, cst.BaseExpression], cst.BaseExpression | None]:
    """A ``kernel[grid](...)`` call's arguments bound to the kernel's parameters, its launch options, its grid."""
    bound: dict[str, cst.BaseExpression] = {}
    options: dict[str, cst.BaseExpression] = {}
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for p, a in zip(params, positional):
        bound[p] = a.value
    for a in call.args:
        if a.keyword is not None:
            (options if a.keyword.value in LAUNCH_OPTIONS else bound)[a.keyword.value] = a.value
    sl = call.func.slice
    grid = sl[0].slice.value if len(sl) == 1 and isinstance(sl[0].slice, cst.Index) else None
    return bound, options, grid


def function_launch_sites(launch: cst.FunctionDef, kernels: dict[str, cst.FunctionDef]) -> list[LaunchSite]:
    """Kernel launches (``kernel[grid](...)`` naming a kernel of ``kernels``) in one function, in source order."""
    out: list[LaunchSite] = []
    for i, st in enumerate(launch.body.body):
        found = [c for cs in _cached("calls", st, _calls_index).values() for c in cs
                 if isinstance(c.func, cst.Subscript) and dotted(c.func.value) in kernels]
        for call in found:
            name = dotted(call.func.value)
            bound, options, grid = bind_launch(call, param_names(kernels[name]))
            top = isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and \
                isinstance(st.body[0], cst.Expr) and st.body[0].value is call
            out.append(LaunchSite(name, call, grid, bound, options, top, i))
    return out


def host_launch_sites(module: cst.Module) -> list[tuple[cst.FunctionDef, LaunchSite]]:
    """Kernel launches in every top-level host function (launch() and the helpers it calls), in source order."""
    jit = jit_functions(module)
    return [(s, site) for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value not in jit
            for site in function_launch_sites(s, jit)]


def launch_sites_in(module: cst.Module, launch: cst.FunctionDef) -> list[LaunchSite]:
    """Kernel launches in one host function of ``module``."""
    return function_launch_sites(launch, jit_functions(module))


def local_assignment(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    """Values assigned to ``name`` anywhere in ``fn`` (simple ``name = value`` and tuple unpacking)."""
    return list(_cached(f"assign:{name}", fn, lambda f: _local_assignment(f, name)))


def _local_assignment(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    vals: list[cst.BaseExpression] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    vals.append(n.value)
                elif isinstance(t.target, cst.Tuple) and isinstance(n.value, cst.Tuple):
                    for te, ve in zip(t.target.elements, n.value.elements):
                        if isinstance(te.value, cst.Name) and te.value.value == name:
                            vals.append(ve.value)
                elif isinstance(t.target, cst.Tuple) and any(
                        isinstance(te.value, cst.Name) and te.value.value == name for te in t.target.elements):
                    vals.append(n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if isinstance(n.target, cst.Name) and n.target.value == name:
                vals.append(n.value)

        def visit_For(self, n: cst.For) -> None:
            if isinstance(n.target, cst.Name) and n.target.value == name:
                vals.append(n.iter)

    fn.visit(V())
    return vals


def replace_functions(module: cst.Module, new: dict[str, cst.FunctionDef | list[cst.BaseStatement] | None]
                      ) -> cst.Module:
    """Replace (or drop, with None) module-level functions by name; a list inserts several statements."""
    body: list[cst.BaseStatement] = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in new:
            rep = new[s.name.value]
            if rep is None:
                continue
            body.extend(rep if isinstance(rep, list) else [rep])
        else:
            body.append(s)
    return module.with_changes(body=body)


def insert_before_function(module: cst.Module, name: str, statements: list[cst.BaseStatement]) -> cst.Module:
    body: list[cst.BaseStatement] = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            body.extend(statements)
        body.append(s)
    return module.with_changes(body=body)


def add_params(fn: cst.FunctionDef, names: list[str], constexpr: bool = False) -> cst.FunctionDef:
    """Append parameters to a kernel signature (``NAME: tl.constexpr`` when constexpr), keeping its layout. After
    parameters with defaults the new ones get a default too (``= 1``, never used: the rewrites pass them by
    keyword at every launch), so positional arguments keep their places."""
    params = list(fn.params.params)
    defaults = any(p.default is not None for p in params)
    if params:
        last = params[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            params[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    for i, n in enumerate(names):
        ann = cst.Annotation(annotation=expr("tl.constexpr")) if constexpr else None
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(names) - 1 else cst.MaybeSentinel.DEFAULT
        space = cst.SimpleWhitespace(" " if constexpr else "")
        params.append(cst.Param(name=cst.Name(n), annotation=ann, comma=comma,
                                **({"default": cst.Integer("1"), "equal": cst.AssignEqual(space, space)}
                                   if defaults else {})))
    return fn.with_changes(params=fn.params.with_changes(params=params))


def add_call_kwargs(call: cst.Call, values: dict[str, cst.BaseExpression]) -> cst.Call:
    args = list(call.args)
    present = {a.keyword.value for a in args if a.keyword}
    for k, v in values.items():
        if k in present:
            args = [a.with_changes(value=v) if a.keyword and a.keyword.value == k else a for a in args]
        else:
            args.append(make_arg(v, k))
    return with_args(call, args)


def remove_call_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    return with_args(call, [a for a in call.args if not (a.keyword and a.keyword.value in names)])


class ReplaceNode(cst.CSTTransformer):
    """Replace specific nodes (by identity) with new ones."""

    def __init__(self, mapping: dict[int, cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel]):
        self.mapping = mapping

    def on_leave(self, original, updated):
        rep = self.mapping.get(id(original))
        if rep is not None:
            return rep
        return updated


def replace_nodes(node, mapping: dict[int, object]):
    return node.visit(ReplaceNode(mapping))


def dependent_names(fn: cst.FunctionDef, seeds) -> set[str]:
    """Names assigned (transitively, through assignments and augmented assignments) from an expression for which
    ``seeds(expr)`` is true, e.g. one that calls ``tl.program_id(0)`` or ``tl.load``."""
    pairs = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                for nm in names_in(t.target):
                    pairs.append((nm, n.value))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            for nm in names_in(n.target):
                pairs.append((nm, n.value))

    fn.visit(V())
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for nm, v in pairs:
            if nm not in out and (seeds(v) or names_in(v) & out):
                out.add(nm)
                changed = True
    return out
