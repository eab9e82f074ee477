"""Which side of each branch a given input reaches (:func:`walk_launch`), read from the source only (the candidate
is never imported here).

:func:`walk_launch` evaluates ``launch`` on concrete inputs with :mod:`.evaluator`: assignments,
helper calls (followed through the file's functions), kernel launches (arguments bound to the
kernel's parameters, ``triton.heuristics`` lambdas evaluated) and every ``if`` on the way, inside
kernels too. A test that depends on a program id or loaded data is *dynamic* (``None``): it may go
both ways within one launch; only a run-time trace can tell (:mod:`.coverage`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import torch

from tritondx.tools.verify.plan.branches import all_branches, is_kernel
from tritondx.tools.verify.plan.evaluator import UNKNOWN, Evaluator, dotted, module_constants


MAX_DEPTH = 8          # helper -> helper -> kernel call depth followed
MAX_STATEMENTS = 20000 # statements evaluated per walk
MAX_UNROLL = 64        # a loop over more (or unknown) values is walked once, its variable unknown


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
        self.kernels = {n for n, fn in self.functions.items() if is_kernel(fn)}
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
