"""Branches a candidate adds or changes, and which side of each a given input reaches.

Read from the source only (the candidate is never imported here): every ``if`` statement and
conditional expression in the file's functions, launcher, helpers and ``@triton.jit`` kernels. A
branch is *changed* when its test is new (or sits in a new function): then both sides must be
reached; when only one arm's code differs from the original's branch with the same test, that arm
must be reached.

:func:`walk_launch` evaluates ``launch`` on concrete inputs with :mod:`.evaluator`: assignments,
helper calls (followed through the file's functions), kernel launches (arguments bound to the
kernel's parameters, ``triton.heuristics`` lambdas evaluated) and every ``if`` on the way, inside
kernels too. A test that depends on a program id or loaded data is *dynamic* (``None``): it may go
both ways within one launch; only a run-time trace can tell (:mod:`.coverage`).
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel

from tritondx.tools.verify.evaluator import (
    _PURE_CALLS,
    _TENSOR_METHODS,
    UNKNOWN,
    Evaluator,
    dotted,
    module_constants,
)

MAX_DEPTH = 8          # helper -> helper -> kernel call depth followed
MAX_STATEMENTS = 20000 # statements evaluated per walk
MAX_UNROLL = 64        # a loop over more (or unknown) values is walked once, its variable unknown


class Branch(BaseModel):
    key: str                       # "func:line:col"
    func: str                      # top-level function holding it
    line: int
    test: str                      # the condition, as written
    in_kernel: bool
    needs: list[bool]              # sides that must be reached: [True, False] for a new test
    why: str                       # "new test" / "body changed" / "else changed" / "new function"
    true_line: int | None = None   # first line of each arm (for a line trace); None: falls through
    false_line: int | None = None  # an empty else after a body that always leaves: the next statement's line
    cuda_side: bool | None = None  # a device-kind test (``t.is_cuda``): the side that runs on a CUDA device
    atoms: int = 0                 # device-kind parts of the test (``t.is_cuda and n > 0``: 1); see flip.py
    arms: list[list[int]] = []     # a conditional expression: (line, col, end line, end col) of each arm
    original: list[bool] = []      # sides that are the original code path unchanged: need no check (see below)


def _is_kernel(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = dotted(target) or ""
        if name.endswith("jit") or name.endswith("autotune") or name.endswith("heuristics"):
            return True
    return False


def _conditions(fn: ast.FunctionDef) -> list[ast.AST]:
    return [n for n in ast.walk(fn) if isinstance(n, (ast.If, ast.IfExp))]


def _arms(node: ast.AST) -> tuple[str, str]:
    if isinstance(node, ast.If):
        return "\n".join(ast.unparse(s) for s in node.body), "\n".join(ast.unparse(s) for s in node.orelse)
    return ast.unparse(node.body), ast.unparse(node.orelse)  # type: ignore[attr-defined]


def _first_line(node: ast.AST, arm: str) -> int | None:
    if isinstance(node, ast.If):
        stmts = node.body if arm == "body" else node.orelse
        return stmts[0].lineno if stmts else None
    return None


#: statements after which the rest of their block does not run
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _next_statements(fn: ast.FunctionDef) -> dict[int, ast.stmt]:
    """id(statement) -> the statement after it in the same block."""
    out: dict[int, ast.stmt] = {}
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                for a, b in zip(block, block[1:]):
                    out[id(a)] = b
    return out


def _false_line(node: ast.AST, nexts: dict[int, ast.stmt]) -> int | None:
    """First line of the false side: the else arm's, or for ``if c: ...; return`` with no else, the
    statement after the ``if`` (it runs only when the body did not). None: no line shows it."""
    first = _first_line(node, "orelse")
    if first is not None or not isinstance(node, ast.If) or not isinstance(node.body[-1], _EXITS):
        return first
    after = nexts.get(id(node))
    return after.lineno if after is not None else None


def _device_type(node: ast.AST) -> bool:
    """``t.device.type`` for a name ``t``."""
    return (isinstance(node, ast.Attribute) and node.attr == "type" and isinstance(node.value, ast.Attribute)
            and node.value.attr == "device" and isinstance(node.value.value, ast.Name))


def cuda_side(test: ast.AST) -> bool | None:
    """The side of a device-kind test that runs on a CUDA device: ``t.is_cuda``, ``t.device.type ==
    "cuda"`` and ``torch.cuda.is_available()`` -> True, their negations -> False; None for any other
    test. Such a test is constant on one device (every input a case gets lives on the verifier's device,
    a CUDA verifier runs where CUDA is available): no input reaches its other side there."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = cuda_side(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda" and isinstance(test.value, ast.Name):
        return True
    if isinstance(test, ast.Call) and not test.args and not test.keywords \
            and (dotted(test.func) or "").endswith("cuda.is_available"):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        a, b = test.left, test.comparators[0]
        if isinstance(a, ast.Constant):
            a, b = b, a
        if _device_type(a) and isinstance(b, ast.Constant) and b.value == "cuda":
            return isinstance(test.ops[0], ast.Eq)
    return None


def device_atoms(test: ast.AST) -> list[tuple[ast.AST, bool]]:
    """The device-kind parts of a test (``t.is_cuda``, ``t.device.type == "cuda"``) with their value on a
    CUDA device: the whole test, or parts of one (``t.is_cuda and n > 0``, ``not t.is_cuda``)."""
    return [(n, side) for n in ast.walk(test) if isinstance(n, (ast.Attribute, ast.Compare, ast.Call))
            and (side := cuda_side(n)) is not None]


def _span(node: ast.AST) -> list[int]:
    return [node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0]


def all_branches(tree: ast.Module) -> list[tuple[ast.FunctionDef, ast.AST]]:
    out = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            out += [(fn, n) for n in _conditions(fn)]
    return out


def added_branches(original_source: str, candidate_source: str) -> list[Branch]:
    """The candidate's branches that the original does not have (by function and test), or whose
    arm's code differs from every original branch with the same test."""
    orig = ast.parse(original_source)
    cand = ast.parse(candidate_source)
    orig_tests: Counter[tuple[str, str]] = Counter()
    orig_arms: dict[tuple[str, str], list[tuple[str, str]]] = {}
    orig_funcs = {fn.name for fn in orig.body if isinstance(fn, ast.FunctionDef)}
    for fn, node in all_branches(orig):
        k = (fn.name, ast.unparse(node.test))
        orig_tests[k] += 1
        orig_arms.setdefault(k, []).append(_arms(node))
    out: list[Branch] = []
    nexts = {fn.name: _next_statements(fn) for fn in cand.body if isinstance(fn, ast.FunctionDef)}
    for fn, node in all_branches(cand):
        test = ast.unparse(node.test)
        k = (fn.name, test)
        body, orelse = _arms(node)
        if fn.name not in orig_funcs:
            needs, why = [True, False], "new function"
        elif orig_tests[k] == 0:
            needs, why = [True, False], "new test"
        else:
            arms = orig_arms[k]
            needs = []
            if body not in {a for a, _ in arms}:
                needs.append(True)
            if orelse not in {b for _, b in arms}:
                needs.append(False)
            if not needs:
                continue
            why = "body changed" if needs == [True] else "else changed" if needs == [False] else "both arms changed"
        original = [side for side in needs if original_side(orig, cand, fn, node, side)] \
            if fn.name in orig_funcs else []
        if original:
            needs = [s for s in needs if s not in original]
            why += "; its " + " and ".join("true" if s else "false" for s in original) + \
                " side is the original code path, unchanged: needs no check"
            if not needs:
                continue
        out.append(Branch(key=f"{fn.name}:{node.lineno}:{node.col_offset}", func=fn.name, line=node.lineno,
                          test=test, in_kernel=_is_kernel(fn), needs=needs, why=why,
                          true_line=_first_line(node, "body"), false_line=_false_line(node, nexts[fn.name]),
                          cuda_side=cuda_side(node.test), atoms=len(device_atoms(node.test)),
                          arms=[_span(node.body), _span(node.orelse)] if isinstance(node, ast.IfExp) else [],
                          original=original))
    return out


# --- a side that is the original code path unchanged ---------------------------------------------------
# A candidate that adds a size branch (a template for rows that fit in registers, the original code above)
# needs no check of the side that runs exactly what the original runs: with the test taking that side, the
# function behaves as the original's (same statements, fresh assignments nothing reads dropped), every
# module-level name it reaches (kernels, helpers, constants, imports) is defined as in the original, every
# function on the way from another function to it is the original's, the module runs nothing new at import
# (beyond definitions, imports and pure constants under new names), and the test itself has no effect.


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
        if isinstance(s, _EXITS):
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


@dataclass
class Walk:
    """What one evaluated call of ``launch`` saw."""
    outcomes: dict[str, set[bool | None]] = field(default_factory=dict)  # branch key -> sides seen (None: dynamic)
    failed_asserts: list[str] = field(default_factory=list)              # asserts that evaluate False
    raises: list[str] = field(default_factory=list)                      # `raise` reached on a known path
    launches: list[str] = field(default_factory=list)                    # kernels launched
    constants: set[int] = field(default_factory=set)                     # ints the branch tests compared against

    def record(self, key: str, truth: bool | None) -> None:
        self.outcomes.setdefault(key, set()).add(truth)


class _StopWalk(Exception):
    pass


class _Eval(Evaluator):
    """The evaluator with the file's functions and kernel launches wired in."""

    def __init__(self, env: dict[str, Any], walker: "_Walker", fn_name: str, depth: int):
        super().__init__(env)
        self.walker, self.fn_name, self.depth = walker, fn_name, depth

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.IfExp):
            t = self.truth(node.test)
            self.walker.note(self.fn_name, node, t, self)
            if t is None:
                self.eval(node.body)
                self.eval(node.orelse)
                return UNKNOWN
            return self.eval(node.body if t else node.orelse)
        return super()._eval(node)

    def _call(self, node: ast.Call) -> Any:
        w = self.walker
        if isinstance(node.func, ast.Subscript):           # kernel[grid](...)
            name = dotted(node.func.value)
            if name in w.kernels:
                w.launch_kernel(name, node, self)
                return None
            return UNKNOWN
        name = dotted(node.func)
        if name in w.functions and name not in w.kernels:
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                return UNKNOWN
            args = [self.eval(a) for a in node.args]
            kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
            return w.run_function(w.functions[name], args, kwargs, self.depth + 1)
        if name in w.kernels and w.in_kernel_depth:        # a @triton.jit helper called from a kernel
            args = [self.eval(a) for a in node.args]
            kwargs = {k.arg: self.eval(k.value) for k in node.keywords if k.arg}
            return w.run_function(w.functions[name], args, kwargs, self.depth + 1, kernel=True)
        return super()._call(node)


class _Walker:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.globals = module_constants(tree)
        self.functions = {fn.name: fn for fn in tree.body if isinstance(fn, ast.FunctionDef)}
        self.kernels = {n for n, fn in self.functions.items() if _is_kernel(fn)}
        self.walk = Walk()
        self.statements = 0
        self.in_kernel_depth = 0
        cached = getattr(tree, "_tdx_index", None)   # one walk per size tried: index the tree once
        if cached is None:
            walked = {n for n in self.kernels if any(   # kernels with something to see: branches, jit calls
                isinstance(x, (ast.If, ast.IfExp)) or (isinstance(x, ast.Call) and dotted(x.func) in self.kernels)
                for x in ast.walk(self.functions[n]))}
            cached = ({id(n): fn.name for fn, n in all_branches(tree)}, walked)
            tree._tdx_index = cached  # type: ignore[attr-defined]
        self._branch_nodes, self.walked_kernels = cached

    # --- recording --------------------------------------------------------------------------------------
    def note(self, fn_name: str, node: ast.AST, truth: bool | None, ev: Evaluator) -> None:
        if id(node) in self._branch_nodes:
            self.walk.record(f"{self._branch_nodes[id(node)]}:{node.lineno}:{node.col_offset}", truth)
            for sub in ast.walk(node.test):  # constants a condition compares against: sizes to try
                v = ev.eval(sub) if isinstance(sub, (ast.Name, ast.Constant, ast.BinOp, ast.Attribute)) else UNKNOWN
                if isinstance(v, int) and not isinstance(v, bool) and 1 < abs(v) < (1 << 40):
                    self.walk.constants.add(abs(v))

    # --- functions ----------------------------------------------------------------------------------------
    def bind(self, fn: ast.FunctionDef, args: list, kwargs: dict) -> dict[str, Any]:
        env = dict(self.globals)
        params = fn.args.posonlyargs + fn.args.args
        defaults = fn.args.defaults
        ev = Evaluator(self.globals)
        for p, d in zip(params[len(params) - len(defaults):], defaults):
            env[p.arg] = ev.eval(d)
        for p, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            env[p.arg] = ev.eval(d) if d is not None else UNKNOWN
        for p, v in zip(params, args):
            env[p.arg] = v
        for p in params[len(args):] + fn.args.kwonlyargs:
            if p.arg in kwargs:
                env[p.arg] = kwargs[p.arg]
            env.setdefault(p.arg, UNKNOWN)
        if fn.args.vararg:
            env[fn.args.vararg.arg] = tuple(args[len(params):]) if len(args) > len(params) else ()
        return env

    def run_function(self, fn: ast.FunctionDef, args: list, kwargs: dict, depth: int, kernel: bool = False) -> Any:
        if depth > MAX_DEPTH:
            return UNKNOWN
        env = self.bind(fn, args, kwargs)
        if kernel:
            self.in_kernel_depth += 1
        try:
            res = self.block(fn.body, env, fn.name, depth)
        finally:
            if kernel:
                self.in_kernel_depth -= 1
        return res[1] if res else None

    def launch_kernel(self, name: str, call: ast.Call, ev: _Eval) -> None:
        fn = self.functions[name]
        self.walk.launches.append(name)
        if any(isinstance(a, ast.Starred) for a in call.args):
            args: list = []
            kwargs: dict = {}
        else:
            args = [ev.eval(a) for a in call.args]
            kwargs = {k.arg: ev.eval(k.value) for k in call.keywords if k.arg}
        env = self.bind(fn, args, kwargs)
        for d in fn.decorator_list:  # @triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
            if isinstance(d, ast.Call) and (dotted(d.func) or "").endswith("heuristics") and d.args \
                    and isinstance(d.args[0], ast.Dict):
                for k, v in zip(d.args[0].keys, d.args[0].values):
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Lambda) and v.args.args:
                        lam_env = {v.args.args[0].arg: {kk: vv for kk, vv in env.items()
                                                        if isinstance(kk, str) and vv is not UNKNOWN}}
                        env[k.value] = Evaluator({**self.globals, **lam_env}).eval(v.body)
        if name not in self.walked_kernels:   # nothing to see in a kernel without branches or jit calls
            return
        self.in_kernel_depth += 1
        try:
            self.block(fn.body, env, name, ev.depth + 1)
        finally:
            self.in_kernel_depth -= 1

    # --- statements ----------------------------------------------------------------------------------------
    def assign(self, target: ast.AST, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = value if isinstance(value, (tuple, list)) and len(value) == len(target.elts) else None
            for i, t in enumerate(target.elts):
                self.assign(t, vals[i] if vals is not None else UNKNOWN, env)

    def block(self, stmts: list[ast.stmt], env: dict[str, Any], fn: str, depth: int) -> tuple[str, Any] | None:
        for s in stmts:
            self.statements += 1
            if self.statements > MAX_STATEMENTS:
                raise _StopWalk
            ev = _Eval(env, self, fn, depth)
            if isinstance(s, ast.Assign):
                v = ev.eval(s.value)
                for t in s.targets:
                    self.assign(t, v, env)
            elif isinstance(s, ast.AnnAssign):
                if s.value is not None:
                    self.assign(s.target, ev.eval(s.value), env)
            elif isinstance(s, ast.AugAssign):
                if isinstance(s.target, ast.Name):
                    env[s.target.id] = ev.eval(ast.BinOp(left=ast.Name(id=s.target.id, ctx=ast.Load()),
                                                         op=s.op, right=s.value))
            elif isinstance(s, ast.Expr):
                ev.eval(s.value)
            elif isinstance(s, ast.Return):
                return ("return", ev.eval(s.value) if s.value is not None else None)
            elif isinstance(s, ast.Assert):
                if ev.truth(s.test) is False:
                    self.walk.failed_asserts.append(f"{fn}: assert {ast.unparse(s.test)}"[:200])
            elif isinstance(s, ast.Raise):
                self.walk.raises.append(f"{fn} line {s.lineno}: {ast.unparse(s)}"[:200])
                return ("raise", UNKNOWN)
            elif isinstance(s, ast.If):
                t = ev.truth(s.test)
                self.note(fn, s, t, ev)
                if t is None:
                    res = self._both(s.body, s.orelse, env, fn, depth)
                else:
                    res = self.block(s.body if t else s.orelse, env, fn, depth)
                if res:
                    return res
            elif isinstance(s, ast.For) and (items := self._items(s.iter, ev)) is not None:
                for item in items:   # a loop over known values (a tuple, a short range): run it for real
                    self.assign(s.target, item, env)
                    res = self.block(s.body, env, fn, depth)
                    if res:
                        return res
                else:
                    res = self.block(s.orelse, env, fn, depth)
                    if res:
                        return res
            elif isinstance(s, (ast.For, ast.While, ast.AsyncFor)):
                inner = dict(env)
                if isinstance(s, (ast.For, ast.AsyncFor)):
                    self.assign(s.target, UNKNOWN, inner)
                    ev.eval(s.iter)
                else:
                    ev.eval(s.test)
                marks = len(self.walk.raises), len(self.walk.failed_asserts)
                self.block(s.body, inner, fn, depth)
                self._unknown_path(marks)   # it may run no time
                for k in inner:
                    if k not in env or inner[k] is not env[k]:
                        env[k] = UNKNOWN
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                res = self.block(s.body, env, fn, depth)
                if res:
                    return res
            elif isinstance(s, ast.Try):
                res = self.block(s.body + s.orelse + s.finalbody, env, fn, depth)
                if res:
                    return res
        return None

    @staticmethod
    def _items(node: ast.AST, ev: Evaluator) -> tuple | None:
        """The values a ``for`` walks when they are known and few (a tuple of arguments, ``range(3)``)."""
        if isinstance(node, ast.Call) and dotted(node.func) == "range" and not node.keywords:
            args = [ev.eval(a) for a in node.args]
            if args and all(isinstance(a, int) and not isinstance(a, bool) for a in args) and len(args) <= 3:
                r = range(*args)
                return tuple(r) if len(r) <= MAX_UNROLL else None
            return None
        v = ev.eval(node)
        return v if isinstance(v, tuple) and len(v) <= MAX_UNROLL else None

    def _both(self, a: list[ast.stmt], b: list[ast.stmt], env: dict[str, Any], fn: str, depth: int):
        ea, eb = dict(env), dict(env)
        marks = len(self.walk.raises), len(self.walk.failed_asserts)
        ra = self.block(a, ea, fn, depth)
        rb = self.block(b, eb, fn, depth)
        for k in set(ea) | set(eb):
            va, vb = ea.get(k, UNKNOWN), eb.get(k, UNKNOWN)
            same = va is vb or (not isinstance(va, torch.Tensor) and not isinstance(vb, torch.Tensor)
                                and va is not UNKNOWN and vb is not UNKNOWN and type(va) is type(vb) and va == vb)
            env[k] = va if same else UNKNOWN
        if ra and rb and ra[0] == rb[0] == "raise":
            return ra
        self._unknown_path(marks)
        return None

    def _unknown_path(self, marks: tuple[int, int]) -> None:
        """Forget the raises and failing asserts met since ``marks`` on a path that may not run (one side of a test
        the evaluator could not decide, a loop it could not count): ``Walk.raises`` are on known paths only. (A
        launcher whose ``x.view(-1, N)`` the evaluator cannot follow reported its ``if N > BLOCK: raise`` as
        reached, and every value-stress case of two corpus norms was dropped as "the original launcher rejects
        it".)"""
        del self.walk.raises[marks[0]:]
        del self.walk.failed_asserts[marks[1]:]


def walk_launch(source: str, inputs: tuple, tree: ast.Module | None = None) -> Walk:
    """Evaluate ``launch(*inputs)`` of ``source`` over its AST; which branches go which way."""
    tree = tree or ast.parse(source)
    w = _Walker(tree)
    launch = w.functions.get("launch")
    if launch is None:
        return w.walk
    try:
        w.run_function(launch, list(inputs), {}, 0)
    except _StopWalk:
        pass
    except RecursionError:
        pass
    return w.walk
