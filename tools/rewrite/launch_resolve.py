"""How ``launches.analyze`` resolves launch values (libcst nodes only: task code never runs here): from
``launch()`` it follows calls into the task file's functions (``MAX_DEPTH`` deep), binding each call's arguments
to the callee's parameters, and records every ``kernel[grid](...)`` it meets (``_Site``) with the definition of each
constexpr, launch option and grid value (``_Def``): followed through locals, parameters, signature defaults, module
constants, tuple-unpacked helper returns, dict literals, autotune configs, heuristics and the kernel's own
defaults, an int folded where it can be."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider
from tritondx.tools.rewrite.cst_util import code_of, constexpr_names, dotted, is_jit, param_names, parse
from tritondx.tools.rewrite.launch_sites import bind_launch
from tritondx.tools.rewrite.launch_records import DEFAULT_OPTIONS, LaunchSite
from tritondx.tools.rewrite.launch_scan import (
    OPTIONS,
    UNKNOWN,
    Unpacked,
    all_params,
    assignments,
    autotune_configs,
    bound_arg,
    calls_outside_defs,
    default_of,
    fn_assignments,
    free_names,
    heuristic_keys,
    is_extent,
    returns,
    top_defs,
)


#: calls followed below launch(); deeper chains are not real launchers
MAX_DEPTH = 8
_FOLD = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
         cst.FloorDivide: operator.floordiv, cst.LeftShift: operator.lshift, cst.Power: operator.pow}


@dataclass
class _Scope:
    fn: cst.FunctionDef | None            # None: module level
    qual: str
    lexical: _Scope | None = None         # the enclosing function of a nested def
    caller: _Scope | None = None
    call: cst.Call | None = None          # the call that entered fn
    call_line: int = 0
    path: tuple[str, ...] = ()
    skip: int = 0                          # leading parameters the call does not bind (ctx of Function.forward)
    instance: _Instance | None = None      # a method entered through an instance: what ``self`` is


@dataclass
class _Instance:
    cls: cst.ClassDef
    made: cst.Call                         # ``Cls(...)``: the call that built it (binds ``__init__``)
    scope: _Scope                          # where that call is


@dataclass
class _Def:
    kind: str
    node: cst.CSTNode | None              # what an edit replaces (an Integer, or a foldable expression)
    scope: _Scope | None
    name: str = ""
    value: int | None = None
    chain: list[str] = field(default_factory=list)
    carrier: tuple | None = None          # (scope fn or None, name): the binding whose reads are its uses
    kernel_fn: cst.FunctionDef | None = None   # autotune / heuristic / kernel default: the kernel
    owner: str = ""                       # signature default: the function whose signature holds it
    expr: cst.BaseExpression | None = None   # computed: the expression that computes it (the tuner scales it)
    also: list[cst.BaseExpression] = field(default_factory=list)   # computed: the same value's other returns


@dataclass
class _Site:
    kernel: str
    kfn: cst.FunctionDef
    call: cst.Call
    scope: _Scope
    line: int
    stmt_index: int
    params: dict[str, _Def]
    grid_node: cst.BaseExpression | None
    grid_value: cst.CSTNode | None        # the grid expression after following a local name
    grid_scope: _Scope | None
    grid_defs: list[_Def]
    record: LaunchSite | None = None


def _config_value(default: cst.BaseExpression | None) -> bool:
    """Whether an autotuner's config may set a constexpr with this signature default: none, or an integer or a
    boolean (a float or string default, ``eps = 1e-6``, is no config value)."""
    return default is None or isinstance(default, cst.Integer) or \
        isinstance(default, cst.Name) and default.value in ("True", "False")


class _Analyzer:
    def __init__(self, source: str, dtypes: tuple[str, ...]):
        self.module = parse(source)
        self.pos = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        self.dtypes = dtypes
        self.functions = {s.name.value: s for s in self.module.body if isinstance(s, cst.FunctionDef)}
        self.kernels = {n: f for n, f in self.functions.items() if is_jit(f)}
        self.classes = {s.name.value: s for s in self.module.body if isinstance(s, cst.ClassDef)}
        self.module_scope = _Scope(None, "<module>")
        self.module_assign = assignments(self.module.body)
        self.sites: list[_Site] = []

    def line(self, node: cst.CSTNode) -> int:
        r = self.pos.get(node)
        return r.start.line if r else 0

    def col(self, node: cst.CSTNode) -> int:
        r = self.pos.get(node)
        return r.start.column if r else 0

    # -- walking the calls --------------------------------------------------------------------
    def run(self) -> None:
        launch = self.functions.get("launch")
        if launch is not None:
            self.walk(_Scope(launch, "launch", path=("launch",)), set())

    def walk(self, scope: _Scope, stack: set[int]) -> None:
        if len(scope.path) > MAX_DEPTH or id(scope.fn) in stack:
            return
        stack = stack | {id(scope.fn)}
        nested = {s.name.value: s for s in top_defs(scope.fn)}
        for i, st in enumerate(scope.fn.body.body):
            if isinstance(st, cst.FunctionDef):
                continue
            for call in calls_outside_defs(st):
                if isinstance(call.func, cst.Subscript):
                    for kname in self.kernels_of(call.func.value, scope):
                        self.add_site(kname, call, scope, i)
                    continue
                target = self.function_of(call.func, scope, nested)
                if target is not None:
                    fn, lexical, qual, skip, inst = target
                    line = self.line(call)
                    self.walk(_Scope(fn, qual, lexical=lexical, caller=scope, call=call, call_line=line,
                                     path=scope.path + (f"{qual}@{line}",), skip=skip, instance=inst), stack)

    def function_of(self, func: cst.BaseExpression, scope: _Scope, nested: dict):
        """(function, lexical scope, qualified name, leading parameters the call does not bind, the instance a
        method is entered through) or None.

        ``name(...)`` of a nested or module-level function; ``Cls.apply(...)`` of a module-level
        ``torch.autograd.Function`` subclass enters its ``forward(ctx, ...)``."""
        if isinstance(func, cst.Name) and func.value not in self.functions:
            alias = [v for top, v in self.module_assign.get(func.value, []) if top]
            if len(alias) == 1 and isinstance(alias[0], cst.Attribute) and alias[0].attr.value == "apply":
                func = alias[0]     # ``fn = Cls.apply`` at module level: calls of fn enter Cls.forward
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value == "apply":
            cls = self.classes.get(func.value.value)
            fwd = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"),
                       None) if cls is not None else None
            return (fwd, None, f"{func.value.value}.forward", 1, None) if fwd is not None else None
        inst = self.instance_of(func, scope)
        if inst is not None:   # ``op(x)``, ``Op()(x)``, ``self.helper(x)``, ``op.run(x)``: a method of a module class
            name = func.attr.value if isinstance(func, cst.Attribute) else \
                "__call__" if self._method(inst.cls, "__call__") is not None else "forward"
            m = self._method(inst.cls, name)
            return (m, None, f"{inst.cls.name.value}.{name}", 1, inst) if m is not None and not is_jit(m) else None
        if not isinstance(func, cst.Name):
            return None
        n = func.value
        s: _Scope | None = scope
        while s is not None and s.fn is not None:
            defs = {d.name.value: d for d in top_defs(s.fn)}
            if n in defs:
                return defs[n], s, f"{s.qual}.{n}", 0, None
            s = s.lexical
        fn = self.functions.get(n)
        if fn is not None and not is_jit(fn) and n not in ("launch", "reference", "make_inputs"):
            return fn, None, n, 0, None
        return None

    @staticmethod
    def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
        return next((st for st in cls.body.body if isinstance(st, cst.FunctionDef) and st.name.value == name), None)

    def instance_of(self, func: cst.BaseExpression, scope: _Scope) -> _Instance | None:
        """The instance of a module-level class a call goes through, with the call that built it: ``op(x)`` and
        ``op.run(x)`` with ``op = Op(...)`` (a local or module-level name), ``Op(...)(x)``, and ``self.run(x)``
        inside a method entered through one. ``Cls.apply`` (an autograd Function) is not an instance."""
        recv = func.value if isinstance(func, cst.Attribute) else func
        if isinstance(func, cst.Attribute) and isinstance(recv, cst.Name) and recv.value == "self":
            return scope.instance
        if isinstance(recv, cst.Name) and recv.value not in self.functions and recv.value not in self.classes:
            d = self.lookup(recv.value, scope, self.line(recv) or 10 ** 9)
            if d is None or d[0] != "assign" or not isinstance(d[1], cst.Call):
                return None
            made, where = d[1], d[2]
        elif isinstance(recv, cst.Call) and not isinstance(func, cst.Attribute):
            made, where = recv, scope
        else:
            return None
        cls = self.classes.get(dotted(made.func)) if isinstance(made.func, cst.Name) else None
        return _Instance(cls, made, where) if cls is not None else None

    def self_attribute(self, e: cst.Attribute, scope: _Scope, chain: list[str], depth: int) -> _Def:
        """``self.block`` in a method entered through an instance: the value ``__init__`` assigns it once, read
        with ``__init__``'s parameters bound by the call that built the instance."""
        inst, attr = scope.instance, e.attr.value
        init = self._method(inst.cls, "__init__")
        values = []
        if init is not None:
            class V(cst.CSTVisitor):
                def visit_Assign(self, n: cst.Assign) -> None:
                    for t in n.targets:
                        if isinstance(t.target, cst.Attribute) and dotted(t.target) == f"self.{attr}":
                            values.append(n.value)
            init.body.visit(V())
        qual = f"{inst.cls.name.value}.__init__"
        if len(values) != 1:
            return _Def("computed", None, scope, chain=chain + [f"self.{attr} not assigned once in {qual}"])
        inner = _Scope(init, qual, caller=inst.scope, call=inst.made, call_line=self.line(inst.made),
                       path=scope.path + (qual,), skip=1)
        return self.resolve(values[0], inner, self.line(values[0]), "literal",
                            chain + [f"self.{attr} set in {qual}"], None, depth + 1)

    def kernels_of(self, e: cst.BaseExpression, scope: _Scope, depth: int = 0) -> list[str]:
        """The kernels ``e`` names: a kernel, a local or parameter bound to one, ``a if cond else b``
        (the branch the condition takes where it is static, else both)."""
        if depth > 6:
            return []
        if isinstance(e, cst.IfExp):
            t = self.truth(e.test, scope, self.line(e) or 10 ** 9)
            branches = [e.body] if t is True else [e.orelse] if t is False else [e.body, e.orelse]
            return [k for b in branches for k in self.kernels_of(b, scope, depth + 1)]
        if not isinstance(e, cst.Name):
            return []
        d = self.lookup(e.value, scope, self.line(e) or 10 ** 9)
        if d is None:
            return [e.value] if e.value in self.kernels else []
        kind, val, sc, _ = d
        if kind in ("assign", "param") and isinstance(val, (cst.Name, cst.IfExp)) and val is not UNKNOWN:
            return self.kernels_of(val, sc, depth + 1)
        return []

    def truth(self, e: cst.BaseExpression, scope: _Scope, at_line: int, depth: int = 0) -> bool | None:
        """Static truth of a condition made of True/False/None and names bound to them, ``not``."""
        if depth > 8:
            return None
        if isinstance(e, cst.Name) and e.value in ("True", "False", "None"):
            return e.value == "True"
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
            t = self.truth(e.expression, scope, at_line, depth + 1)
            return None if t is None else not t
        if isinstance(e, cst.Integer):
            return int(e.value, 0) != 0
        if isinstance(e, cst.Name):
            d = self.lookup(e.value, scope, at_line)
            if d is not None and d[0] in ("assign", "param", "default") and isinstance(d[1], cst.BaseExpression):
                return self.truth(d[1], d[2], d[3], depth + 1)
        return None

    # -- name lookup ------------------------------------------------------------------------------
    def vline(self, v) -> int:
        return self.line(v.call) if isinstance(v, Unpacked) else self.line(v)

    def lookup(self, name: str, scope: _Scope, at_line: int):
        """(how, value, scope the value is read in, line it is read at) or None; how is 'assign', 'param'
        (the caller's argument), 'default' (the signature default) or 'ambiguous'."""
        s: _Scope | None = scope
        while s is not None:
            if s.fn is None:
                vals = self.module_assign.get(name, [])
                if vals:
                    if len(vals) == 1:
                        return "assign", vals[0][1], self.module_scope, self.vline(vals[0][1])
                    return "ambiguous", None, s, 0
                return None
            assigns = fn_assignments(s.fn).get(name, [])
            if assigns:
                before = [a for a in assigns if self.vline(a[1]) < at_line] or assigns
                last = before[-1]
                if len(before) > 1 and not last[0]:
                    return "ambiguous", [v for _, v in before], s, 0
                return "assign", last[1], s, self.vline(last[1])
            if name in [p.name.value for p in all_params(s.fn)]:
                arg = bound_arg(s.fn, s.call, name, s.skip) if s.call is not None else None
                if arg is not None:
                    return "param", arg, s.caller, s.call_line
                default = default_of(s.fn, name)
                if default is not None:
                    return "default", default, s.lexical or self.module_scope, self.line(default)
                return None
            s = s.lexical if s.lexical is not None else self.module_scope
        return None

    # -- value resolution -------------------------------------------------------------------------
    def resolve(self, e: cst.BaseExpression, scope: _Scope, at_line: int, kind: str = "literal",
                chain: list[str] | None = None, carrier: tuple | None = None, depth: int = 0) -> _Def:
        chain = list(chain or [])
        if depth > 12:
            return _Def("computed", None, scope, chain=chain)
        if isinstance(e, cst.Integer):
            return _Def(kind, e, scope, value=int(e.value, 0), chain=chain, carrier=carrier)
        if isinstance(e, cst.Name):
            d = self.lookup(e.value, scope, at_line)
            if d is None:
                return _Def("computed", None, scope, name=e.value, chain=chain + [f"unresolved {e.value}"])
            how, val, sc, vline = d
            if how == "ambiguous":
                return self.several_paths(e.value, val, sc, chain)
            fn = sc.fn if how == "assign" else None
            if how == "assign":
                if isinstance(val, Unpacked):
                    return self.helper_return(val, sc, chain + [f"{e.value} unpacked from {code_of(val.call.func)}()"],
                                              (id(sc.fn), e.value), depth)
                k = "module_constant" if sc.fn is None else "local"
                return self._named(self.resolve(val, sc, vline, k, chain + [f"{k} {e.value}"],
                                                (id(sc.fn) if sc.fn else None, e.value), depth + 1), e.value, fn)
            if how == "param":
                return self.resolve(val, sc, vline, "literal",
                                    chain + [f"parameter {e.value} of {scope.qual}"], carrier, depth + 1)
            # a signature default: the parameter carries it inside its function
            owner = self._owner_of_param(e.value, scope)
            r = self._named(self.resolve(val, sc, vline, "signature_default",
                                         chain + [f"default of parameter {e.value}"],
                                         (id(owner) if owner else None, e.value), depth + 1), e.value, owner)
            if r.kind == "signature_default" and owner is not None:
                r.owner = owner.name.value
            return r
        if isinstance(e, cst.Subscript):
            return self.dict_entry(e, scope, at_line, chain, depth)
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self" \
                and scope.instance is not None:
            return self.self_attribute(e, scope, chain, depth)
        value = self.fold(e, scope, at_line, depth)
        if value is not None:
            return _Def(kind if kind != "literal" else "local" if scope.fn is not None else kind, e, scope,
                        value=value, chain=chain + [f"folded {code_of(e)}"], carrier=carrier)
        return _Def("computed", None, scope, chain=chain + [f"computed {code_of(e)}"], carrier=carrier, expr=e)

    @staticmethod
    def several_paths(name: str, values: list | None, scope: _Scope, chain: list[str]) -> _Def:
        """A local assigned on several paths (``if hopper: BV = 64`` / ``else: BV = 32``): which one a launch takes
        is decided at run time; the value is computed, and scaling it scales it in every assignment. Only where each
        assignment is a whole value written in the function (a literal, a call such as ``next_power_of_2(N)``, an
        arithmetic or conditional expression, a name): an augmented or unpacked assignment, a loop target or a
        tensor's extent (``x.shape[-1]``, ``x.size(-1)``) leaves it unresolved."""
        why = chain + [f"{name} assigned on several paths"]
        ok = (cst.Integer, cst.Call, cst.BinaryOperation, cst.IfExp, cst.Name)
        if scope.fn is None or not values or not all(isinstance(v, ok) and not is_extent(v) for v in values):
            return _Def("computed", None, scope, name=name, chain=why)
        return _Def("computed", None, scope, name=name, chain=why[:-1] + [f"{name} assigned on {len(values)} paths"],
                    expr=values[0], also=values[1:])

    def _owner_of_param(self, name: str, scope: _Scope) -> cst.FunctionDef | None:
        s = scope
        while s is not None and s.fn is not None:
            if name in param_names(s.fn) or name in [p.name.value for p in s.fn.params.kwonly_params]:
                return s.fn
            s = s.lexical
        return None

    @staticmethod
    def _named(d: _Def, name: str, fn) -> _Def:
        if not d.name:
            d.name = name
        return d

    def fold(self, e: cst.BaseExpression, scope: _Scope, at_line: int, depth: int) -> int | None:
        """Static int value of a constant expression (ints, + - * // << **, names that resolve to ints,
        ``triton.next_power_of_2`` / min / max of those)."""
        if depth > 12:
            return None
        if isinstance(e, cst.Integer):
            return int(e.value, 0)
        if isinstance(e, cst.BinaryOperation) and type(e.operator) in _FOLD:
            a, b = self.fold(e.left, scope, at_line, depth + 1), self.fold(e.right, scope, at_line, depth + 1)
            if a is None or b is None or (isinstance(e.operator, (cst.Power, cst.LeftShift)) and b > 64) or \
                    (isinstance(e.operator, cst.FloorDivide) and b == 0):
                return None
            return _FOLD[type(e.operator)](a, b)
        if isinstance(e, cst.Name):
            d = self.resolve(e, scope, at_line, depth=depth + 1)
            return d.value if d.kind != "computed" else None
        if isinstance(e, cst.Call) and not any(a.keyword or a.star for a in e.args):
            vals = [self.fold(a.value, scope, at_line, depth + 1) for a in e.args]
            if None in vals or not vals:
                return None
            f = dotted(e.func)
            if f in ("min", "max"):
                return (min if f == "min" else max)(vals)
            if f == "triton.next_power_of_2" and len(vals) == 1 and vals[0] > 0:
                return 1 << (vals[0] - 1).bit_length()
        return None

    def helper_return(self, u: Unpacked, scope: _Scope, chain: list[str], carrier: tuple, depth: int) -> _Def:
        target = self.function_of(u.call.func, scope, {})
        if target is None:
            return _Def("computed", None, scope, chain=chain)
        fn, lexical, qual, skip, inst = target
        rets = returns(fn)
        if len(rets) > 1 and all(isinstance(r, cst.Tuple) and u.index < len(r.elements) for r in rets):
            # ``if n <= 1024: return 128, 2`` ... ``return 1024, 8``: which return a launch takes is decided at
            # run time; the value is computed, and scaling it scales it in every return
            els = [r.elements[u.index].value for r in rets]
            return _Def("computed", None, scope, chain=chain + [f"returned by {qual} ({len(rets)} returns)"],
                        expr=els[0], also=els[1:])
        if len(rets) != 1 or not isinstance(rets[0], cst.Tuple) or u.index >= len(rets[0].elements):
            return _Def("computed", None, scope, chain=chain + [f"{qual} returns no single tuple"])
        inner = _Scope(fn, qual, lexical=lexical, caller=scope, call=u.call, call_line=self.line(u.call),
                       path=scope.path + (qual,), skip=skip, instance=inst)
        el = rets[0].elements[u.index].value
        d = self.resolve(el, inner, self.line(el), "helper_return", chain + [f"returned by {qual}"], None, depth + 1)
        if d.kind in ("local", "literal"):
            d.kind = "helper_return"
        return d

    def dict_entry(self, e: cst.Subscript, scope: _Scope, at_line: int, chain: list[str], depth: int) -> _Def:
        keys: list[cst.BaseExpression] = []
        base: cst.BaseExpression = e
        while isinstance(base, cst.Subscript) and len(base.slice) == 1 and isinstance(base.slice[0].slice, cst.Index):
            keys.insert(0, base.slice[0].slice.value)
            base = base.value
        if not isinstance(base, cst.Name):   # ``x.shape[-2:][0]``: computed where it stands
            return _Def("computed", None, scope, chain=chain + [f"computed {code_of(e)}"], expr=e)
        d = self.lookup(base.value, scope, at_line)
        if d is None or d[0] == "ambiguous" or not isinstance(d[1], cst.Dict):
            return _Def("computed", None, scope, chain=chain + [f"computed {code_of(e)}"], expr=e)
        node: cst.BaseExpression = d[1]
        path = []
        for k in keys:
            if not isinstance(node, cst.Dict):
                return _Def("computed", None, scope, chain=chain + [f"computed {code_of(e)}"])
            entry = self._pick(node, k)
            if entry is None:
                return _Def("computed", None, scope, chain=chain + [f"no static entry {code_of(k)} in {base.value}"])
            path.append(code_of(entry.key))
            node = entry.value
        sc = d[2]
        name = f"{base.value}[{']['.join(path)}]"
        r = self.resolve(node, sc, self.line(node), "dict_entry", chain + [f"entry {name}"],
                         (id(sc.fn) if sc.fn else None, base.value), depth + 1)
        r.name = r.name or name
        return r

    def _spread_entry(self, call: cst.Call, p: str, scope: _Scope, line: int) -> cst.BaseExpression | None:
        """The value ``p`` takes from a call's one ``**mapping``, where that is a local or module-level name bound
        once to a dict display or a ``dict(key=...)`` call (``meta = dict(BLOCK=128, num_warps=4)``)."""
        spread = [a.value for a in call.args if a.star == "**"]
        if len(spread) != 1 or not isinstance(spread[0], cst.Name):
            return None
        d = self.lookup(spread[0].value, scope, line)
        if d is None or d[0] != "assign" or not isinstance(d[1], cst.BaseExpression):
            return None
        val = d[1]
        if isinstance(val, cst.Dict) and all(isinstance(el, cst.DictElement) for el in val.elements):
            hit = next((el for el in val.elements if isinstance(el.key, cst.SimpleString)
                        and el.key.evaluated_value == p), None)
            return hit.value if hit is not None else None
        if isinstance(val, cst.Call) and dotted(val.func) == "dict" and all(a.keyword is not None for a in val.args):
            return next((a.value for a in val.args if a.keyword.value == p), None)
        return None

    def _pick(self, d: cst.Dict, key: cst.BaseExpression):
        entries = [el for el in d.elements if isinstance(el, cst.DictElement)]
        code = code_of(key)
        if isinstance(key, cst.SimpleString):
            return next((el for el in entries if isinstance(el.key, cst.SimpleString)
                         and el.key.evaluated_value == key.evaluated_value), None)
        hit = next((el for el in entries if code_of(el.key) == code), None)
        if hit is not None:
            return hit
        # a key only known at run time: the task's dtype where the dict is keyed by dtypes, or the only entry
        for dt in self.dtypes:
            hit = next((el for el in entries if code_of(el.key) in (f"torch.{dt}", f'"{dt}"', f"'{dt}'")), None)
            if hit is not None:
                return hit
        return entries[0] if len(entries) == 1 else None

    # -- sites ----------------------------------------------------------------------------------
    def add_site(self, kname: str, call: cst.Call, scope: _Scope, index: int) -> None:
        kfn = self.kernels[kname]
        line = self.line(call)
        bound, options, grid = bind_launch(call, param_names(kfn))
        auto = autotune_configs(kfn, self.module)
        heur = heuristic_keys(kfn)
        defs: dict[str, _Def] = {}
        spread = [code_of(a.value) for a in call.args if a.star == "**"]   # ``kernel[grid](..., **meta)``
        for p in constexpr_names(kfn) + list(OPTIONS):
            arg = bound.get(p) if p not in OPTIONS else options.get(p)
            if arg is not None:
                defs[p] = self.resolve(arg, scope, line, "literal", [f"argument {p}"])
            elif auto is not None and any(p in c for c in auto[0]):
                defs[p] = _Def("autotune_config", None, None, name=p, kernel_fn=kfn,
                               chain=[f"@triton.autotune configs of {kname}"])
            elif p in heur:
                defs[p] = _Def("heuristic", None, None, name=p, kernel_fn=kfn, chain=[f"@triton.heuristics {p}"])
            elif spread:   # ``**meta``: an entry of a dict written in the launcher, else decided at run time
                entry = self._spread_entry(call, p, scope, line)
                defs[p] = self.resolve(entry, scope, line, "literal", [f"entry {p} of **{spread[0]}"]) \
                    if entry is not None else \
                    _Def("computed", None, scope, name=p, chain=[f"may be passed in **{spread[0]}"])
            elif auto is not None and not auto[0] and p not in OPTIONS and _config_value(default_of(kfn, p)):
                # an autotuner whose configs are not read statically sets what the launch leaves unset (Triton
                # raises for a constexpr nothing sets) and may override an integer or boolean default
                defs[p] = _Def("autotune_config", None, None, name=p, kernel_fn=kfn,
                               chain=[f"@triton.autotune configs of {kname} (not read statically)"])
            elif p not in OPTIONS and default_of(kfn, p) is not None:
                dflt = default_of(kfn, p)
                defs[p] = _Def("kernel_default", dflt, None, name=p, kernel_fn=kfn,
                               value=int(dflt.value, 0) if isinstance(dflt, cst.Integer) else None,
                               chain=[f"default of {kname}'s parameter {p}"])
            elif p in OPTIONS:
                defs[p] = _Def("unset", None, scope, name=p, value=DEFAULT_OPTIONS[p], chain=["Triton default"])
        gval, gscope = grid, scope
        if isinstance(grid, cst.Name):
            d = self.lookup(grid.value, scope, line)
            if d is not None and d[0] == "assign" and isinstance(d[1], cst.BaseExpression) and d[1] is not UNKNOWN:
                gval, gscope = d[1], d[2]
            else:
                local_def = next((f for f in top_defs(scope.fn) if f.name.value == grid.value), None)
                gval = local_def if local_def is not None else grid
        gdefs = []
        if gval is not None:
            for n in free_names(gval):
                gdefs.append(self.resolve(cst.Name(n), gscope, line, "literal", [f"grid reads {n}"]))
        self.sites.append(_Site(kname, kfn, call, scope, line, index, defs, grid, gval, gscope, gdefs))
