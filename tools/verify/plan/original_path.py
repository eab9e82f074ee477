"""Whether a side of a candidate's branch is the original code path unchanged (``original_side``): then it needs
no check. Read from the source only.

A candidate that adds a size branch (a template for rows that fit in registers, the original code above)
needs no check of the side that runs exactly what the original runs: with the test taking that side, the
function behaves as the original's (same statements, fresh assignments nothing reads dropped), every
module-level name it reaches (kernels, helpers, constants, imports) is defined as in the original, every
function on the way from another function to it is the original's, the module runs nothing new at import
(beyond definitions, imports and pure constants under new names), and the test itself has no effect.
"""

from __future__ import annotations

import ast
import copy

from tritondx.tools.verify.plan.evaluator import _PURE_CALLS, _TENSOR_METHODS, dotted


#: statements after which the rest of their block does not run
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _pure(node: ast.AST) -> bool:
    """No effect when evaluated: no assignment expression, only pure builtins and tensor size queries called."""
    for n in ast.walk(node):
        if isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
        if isinstance(n, ast.Call):
            name = dotted(n.func) or ""
            if name in _PURE_CALLS or (isinstance(n.func, ast.Attribute) and n.func.attr in _TENSOR_METHODS):
                continue
            return False
    return True


class _Inline(ast.NodeTransformer):
    """The function with one branch replaced by one of its sides, and each block cut after a statement that
    leaves it (what follows never runs)."""

    def __init__(self, target: tuple[int, int], side: bool):
        self.target, self.side = target, side

    def _hit(self, node: ast.AST) -> bool:
        return (node.lineno, node.col_offset) == self.target

    def visit_If(self, node: ast.If):
        if self._hit(node):
            return [self.visit(s) for s in (node.body if self.side else node.orelse)]
        return self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp):
        if self._hit(node):
            return self.visit(node.body if self.side else node.orelse)
        return self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, name, _cut(_flatten(block)))
        return node


def _flatten(block: list) -> list:
    out = []
    for s in block:
        out.extend(s if isinstance(s, list) else [s])
    return out


def _cut(block: list[ast.stmt]) -> list[ast.stmt]:
    for i, s in enumerate(block):
        if isinstance(s, EXITS):
            return block[:i + 1]
    return block


def _stored(fn: ast.AST) -> set[str]:
    out = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    return out | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _drop_fresh(fn: ast.FunctionDef, keep: set[str]) -> None:
    """Remove ``name = <pure expression>`` where the original never assigns ``name`` and nothing reads it."""
    changed = True
    while changed:
        changed = False
        read = _loaded(fn)
        for node in ast.walk(fn):
            for field_name in ("body", "orelse", "finalbody"):
                block = getattr(node, field_name, None)
                if not isinstance(block, list):
                    continue
                kept = [s for s in block if not (
                    isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and s.targets[0].id not in keep and s.targets[0].id not in read and _pure(s.value))]
                if len(kept) != len(block):
                    setattr(node, field_name, kept)
                    changed = True


def _definitions(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Module-level name -> the statements that bind it (functions, classes, assignments, imports)."""
    out: dict[str, list[ast.AST]] = {}
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(s.name, []).append(s)
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.setdefault(n.id, []).append(s)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                out.setdefault((a.asname or a.name).split(".")[0], []).append(s)
    return out


def _module_statements(tree: ast.Module, original_defs: dict[str, list[ast.AST]]) -> list[str]:
    """The module's top-level statements that run at import with an effect of their own: all but imports, function
    definitions that do nothing else (:func:`_quiet_def`), and pure assignments to names the original does not
    define."""
    out = []
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)) or (
                isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and _quiet_def(s)):
            continue
        if isinstance(s, ast.Assign) and _pure(s.value) and all(
                isinstance(t, ast.Name) and t.id not in original_defs for t in s.targets):
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):   # a docstring
            continue
        out.append(ast.dump(s))
    return out


#: decorators that only wrap a function when the module is imported
_QUIET_DECORATORS = ("triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics",
                     "triton.Config", "torch.no_grad", "torch.inference_mode", "staticmethod")


def _quiet_def(fn: ast.FunctionDef) -> bool:
    """Defining ``fn`` does nothing else at import: known decorators, defaults without effects."""
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (dotted(target) or "") not in _QUIET_DECORATORS:
            return False
    return all(_pure(d) for d in fn.args.defaults + [k for k in fn.args.kw_defaults if k is not None])


def _dump(nodes: list[ast.AST] | None) -> str | None:
    return None if nodes is None else "\n".join(ast.dump(n) for n in nodes)


def _in_loop(fn: ast.FunctionDef, node: ast.AST) -> bool:
    """``node`` sits in a loop or comprehension of ``fn``: its sides may alternate within one call."""
    loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    return any(node in set(ast.walk(lp)) - {lp} for lp in ast.walk(fn) if isinstance(lp, loops))


def original_side(orig: ast.Module, cand: ast.Module, fn: ast.FunctionDef, node: ast.AST, side: bool) -> bool:
    """Whether taking ``side`` of ``node`` (a branch of ``fn``) runs exactly the original's code: see above."""
    ofn = next((f for f in orig.body if isinstance(f, ast.FunctionDef) and f.name == fn.name), None)
    if ofn is None or not _pure(node.test) or _in_loop(fn, node):  # type: ignore[attr-defined]
        return False
    if ast.dump(ofn.args) != ast.dump(fn.args) or \
            [ast.dump(d) for d in ofn.decorator_list] != [ast.dump(d) for d in fn.decorator_list]:
        return False
    inlined = _Inline((node.lineno, node.col_offset), side).visit(copy.deepcopy(fn))
    base = _Inline((-1, -1), side).visit(copy.deepcopy(ofn))
    _drop_fresh(inlined, _stored(ofn))
    if ast.dump(ast.Module(body=inlined.body, type_ignores=[])) != ast.dump(ast.Module(body=base.body,
                                                                                      type_ignores=[])):
        return False
    odefs, cdefs = _definitions(orig), _definitions(cand)
    if _module_statements(orig, odefs) != _module_statements(cand, odefs):   # import-time effects
        return False
    # every module-level name the side reaches (through the functions it calls) is the original's
    seen: set[str] = {fn.name}
    todo = list(_loaded(inlined))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if _dump(odefs.get(name)) != _dump(cdefs.get(name)):
            return False
        for d in cdefs.get(name, []):
            todo.extend(_loaded(d))
    # and so is every function on the way to this one (its arguments are the original's)
    callers, frontier = set(), {fn.name}
    while frontier:
        new = {n for n, ds in cdefs.items() for d in ds if isinstance(d, ast.FunctionDef) and n not in callers
               and n != fn.name and _loaded(d) & frontier}
        callers |= new
        frontier = new
    return all(_dump(odefs.get(n)) == _dump(cdefs.get(n)) for n in callers)
