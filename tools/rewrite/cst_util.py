"""libcst helpers shared by the rewrites: parsing, names, expression and module surgery (launch sites:
``launch_sites.py``; literal launch values: ``launch_values.py``)."""

from __future__ import annotations

from collections import OrderedDict
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
    """Replace specific nodes (by identity) with new ones; put a statement before each line of ``before``."""

    def __init__(self, mapping: dict[int, cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel],
                 before: dict[int, cst.BaseStatement] | None = None):
        self.mapping, self.before = mapping, before or {}

    def on_leave(self, original, updated):
        rep = self.mapping.get(id(original))
        if rep is not None:
            return rep
        if id(original) in self.before:
            return cst.FlattenSentinel([self.before[id(original)], updated])
        return updated


def replace_nodes(node, mapping: dict[int, object], before: dict[int, cst.BaseStatement] | None = None):
    """``node`` with the nodes of ``mapping`` replaced and the statements of ``before`` put before their lines
    (both by the identity of the original node; ``statement_lines`` finds a line)."""
    return node.visit(ReplaceNode(mapping, before))


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


def with_prelude(fn: cst.FunctionDef, lines: list[str]) -> cst.FunctionDef:
    """``fn`` with ``lines`` (statements) first in its body, after its docstring if it has one."""
    body = list(fn.body.body)
    head = []
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        head, body = [body[0]], body[1:]
    return fn.with_changes(body=fn.body.with_changes(body=head + [stmt(x) for x in lines] + body))


def statement_lines(module: cst.Module, node_ids: set[int]) -> dict[int, cst.SimpleStatementLine]:
    """For each node of ``node_ids`` (by identity), the statement line of a block that holds it, where a statement
    can go just before it: not where the node sits in a lambda, a comprehension or a one-line suite
    (``if x: f()``), nor on a line with several statements."""
    found: dict[int, cst.SimpleStatementLine] = {}

    class V(cst.CSTVisitor):
        def __init__(self) -> None:
            self.line: list[cst.SimpleStatementLine | None] = []

        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            self.line.append(n if len(n.body) == 1 else None)

        def leave_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            self.line.pop()

        def visit_SimpleStatementSuite(self, n) -> None:
            self.line.append(None)

        def leave_SimpleStatementSuite(self, n) -> None:
            self.line.pop()

        def _opaque(self, n) -> None:
            self.line.append(None)

        def _close(self, n) -> None:
            self.line.pop()

        visit_Lambda = visit_ListComp = visit_GeneratorExp = visit_DictComp = visit_SetComp = _opaque
        leave_Lambda = leave_ListComp = leave_GeneratorExp = leave_DictComp = leave_SetComp = _close

        def on_visit(self, node: cst.CSTNode) -> bool:
            if id(node) in node_ids and self.line and self.line[-1] is not None:
                found[id(node)] = self.line[-1]
            return super().on_visit(node)

    module.visit(V())
    return found


def module_names(module: cst.Module) -> set[str]:
    """Names the module binds at its top level: functions, classes, assignments, imports."""
    out: set[str] = set()
    for st in module.body:
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            out.add(st.name.value)
        elif isinstance(st, cst.SimpleStatementLine):
            for b in st.body:
                if isinstance(b, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in b.targets] if isinstance(b, cst.Assign) else [b.target]
                    out.update(t.value for t in targets if isinstance(t, cst.Name))
                elif isinstance(b, (cst.Import, cst.ImportFrom)) and not isinstance(b.names, cst.ImportStar):
                    for a in b.names:
                        name = a.asname.name if a.asname else a.name
                        if isinstance(name, cst.Name):
                            out.add(name.value)
                        elif isinstance(b, cst.Import):
                            out.add(dotted(name).split(".")[0])
    return out


def assignments(fn: cst.CSTNode, augmented: bool = False, unpacked: bool = False
                ) -> dict[str, list[cst.BaseExpression]]:
    """Each name's assigned values in ``fn``: ``name = value``; with ``augmented`` also ``name += value``; with
    ``unpacked`` also a name in a tuple target (``a, b = ...``: the whole value) and a ``for`` target (its iterable).
    Not ``local_assignment``: that one answers for one name, counting ``p += BLOCK`` always."""
    out: dict[str, list[cst.BaseExpression]] = {}

    def names(target: cst.BaseExpression) -> list[str]:
        if isinstance(target, cst.Name):
            return [target.value]
        if unpacked and isinstance(target, (cst.Tuple, cst.List)):
            return [x for e in target.elements for x in names(e.value)]
        return []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                for x in names(t.target):
                    out.setdefault(x, []).append(n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if augmented:
                for x in names(n.target):
                    out.setdefault(x, []).append(n.value)

        def visit_For(self, n: cst.For) -> None:
            if unpacked:
                for x in names(n.target):
                    out.setdefault(x, []).append(n.iter)
    fn.visit(V())
    return out
