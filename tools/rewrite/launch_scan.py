"""CST reading for the launch analysis (``launches.py``): assignments, returns, parameters and their bindings,
names a grid reads, the META keys it reads, ``@triton.autotune`` configs and ``@triton.heuristics`` keys."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.cst_util import _cached, dotted, names_in, param_names

OPTIONS = ("num_warps", "num_stages")


@dataclass
class Unpacked:
    """``A, B = helper(...)``: the value of one target is element ``index`` of the helper's return."""
    call: cst.Call
    index: int


def assignments(body) -> dict[str, list[tuple[bool, object]]]:
    """name -> [(top_level, value expression or Unpacked)] in source order, nested defs excluded."""
    out: dict[str, list] = {}

    class V(cst.CSTVisitor):
        def __init__(self):
            self.depth = 0

        def visit_FunctionDef(self, n) -> bool:
            return False

        def visit_ClassDef(self, n) -> bool:
            return False

        def on_visit(self, n) -> bool:
            if isinstance(n, cst.BaseCompoundStatement) and not isinstance(n, (cst.FunctionDef, cst.ClassDef)):
                self.depth += 1
            return super().on_visit(n)

        def on_leave(self, n) -> None:
            if isinstance(n, cst.BaseCompoundStatement) and not isinstance(n, (cst.FunctionDef, cst.ClassDef)):
                self.depth -= 1
            super().on_leave(n)

        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                self.target(t.target, n.value)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            if n.value is not None:
                self.target(n.target, n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if isinstance(n.target, cst.Name):
                out.setdefault(n.target.value, []).append((False, None))

        def visit_For(self, n: cst.For) -> None:
            for name in target_names(n.target):
                out.setdefault(name, []).append((False, None))

        def target(self, t, value) -> None:
            top = self.depth == 0
            if isinstance(t, cst.Name):
                out.setdefault(t.value, []).append((top, value))
            elif isinstance(t, (cst.Tuple, cst.List)):
                if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(t.elements):
                    for te, ve in zip(t.elements, value.elements):
                        self.target(te.value, ve.value)
                else:
                    for i, te in enumerate(t.elements):
                        if isinstance(te.value, cst.Name):
                            v = Unpacked(value, i) if isinstance(value, cst.Call) else None
                            out.setdefault(te.value.value, []).append((top, v))

    mod = cst.Module(body=list(body)) if not isinstance(body, cst.Module) else body
    mod.visit(V())
    # non-values (aug-assign, loops, unknown unpacking) make a name ambiguous: keep the marker, value None
    return {k: [(top, v if v is not None else UNKNOWN) for top, v in vs] for k, vs in out.items()}


UNKNOWN = cst.Name("__tdx_unknown__")


#: tensor methods whose result is the data's extent, not a block: ``x.size(-1)``, ``x.numel()``
EXTENT_METHODS = frozenset({"size", "numel", "stride", "dim", "element_size", "nelement"})


def is_extent(e: cst.BaseExpression) -> bool:
    """``x.shape[-1]``, ``x.size(-1)``, ``x.numel()``: a tensor's extent as it stands (the data's size, not a tile)."""
    if isinstance(e, cst.Subscript):
        return True
    return isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in EXTENT_METHODS


def fn_assignments(fn: cst.FunctionDef) -> dict[str, list]:
    return _cached("launch_assign", fn, lambda f: assignments(f.body.body))


def target_names(t) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in target_names(e.value)]
    return []


def top_defs(fn: cst.FunctionDef | None) -> list[cst.FunctionDef]:
    if fn is None:
        return []
    return [s for s in fn.body.body if isinstance(s, cst.FunctionDef)]


def calls_outside_defs(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n) -> bool:
            return False

        def visit_Lambda(self, n) -> bool:
            return False

        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(V())
    return out


def returns(fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    out = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n) -> bool:
            return n is fn

        def visit_Return(self, n: cst.Return) -> None:
            if n.value is not None:
                out.append(n.value)

    fn.visit(V())
    return out


def all_params(fn: cst.FunctionDef) -> list[cst.Param]:
    return list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)


def default_of(fn: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    p = next((p for p in all_params(fn) if p.name.value == name), None)
    return p.default if p is not None else None


def bound_arg(fn: cst.FunctionDef, call: cst.Call, name: str, skip: int = 0) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    positional = [a for a in call.args if a.keyword is None]
    names = [p.name.value for p in list(fn.params.posonly_params) + list(fn.params.params)][skip:]
    for i, a in enumerate(positional):
        if a.star:
            return None
        if i < len(names) and names[i] == name:
            return a.value
    return None


def free_names(node: cst.CSTNode) -> list[str]:
    """Names a grid reads (lambda / def parameters and attribute / keyword names excluded)."""
    bound: set[str] = set()
    if isinstance(node, cst.Lambda):
        bound = {p.name.value for p in node.params.params}
        node = node.body
    elif isinstance(node, cst.FunctionDef):
        bound = set(param_names(node)) | set(assignments(node.body.body))
    return sorted(names_in(node) - bound - HOST_BUILTINS)


HOST_BUILTINS = {"triton", "torch", "tl", "min", "max", "len", "int", "range", "abs", "True", "False", "None"}


def meta_keys(node: cst.CSTNode) -> list[str]:
    params: set[str] = set()
    if isinstance(node, cst.Lambda):
        params = {p.name.value for p in node.params.params}
    elif isinstance(node, cst.FunctionDef):
        params = set(param_names(node))
    keys: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Subscript(self, n: cst.Subscript) -> None:
            if isinstance(n.value, cst.Name) and n.value.value in params and len(n.slice) == 1 and \
                    isinstance(n.slice[0].slice, cst.Index) and isinstance(n.slice[0].slice.value, cst.SimpleString):
                k = n.slice[0].slice.value.evaluated_value
                if k not in keys:
                    keys.append(k)

    node.visit(V())
    return keys


def decorator_call(kfn: cst.FunctionDef, name: str) -> cst.Call | None:
    for d in kfn.decorators:
        if isinstance(d.decorator, cst.Call) and dotted(d.decorator.func) in (name, name.split(".")[-1]):
            return d.decorator
    return None


def configs_arg(call: cst.Call) -> cst.BaseExpression | None:
    """The ``configs`` argument of an ``@triton.autotune(...)`` call."""
    return next((a.value for a in call.args if a.keyword and a.keyword.value == "configs"),
                call.args[0].value if call.args and call.args[0].keyword is None else None)


def autotune_configs(kfn: cst.FunctionDef, module: cst.Module | None = None
                     ) -> tuple[list[dict[str, int]], cst.Call] | None:
    """The configs of an ``@triton.autotune(configs=...)`` decorator as values, with the call; None when the kernel is
    not autotuned. A literal list is read alone; given the kernel's ``module``, also the forms ``expand_configs``
    reads (a comprehension, a module-level name, ``get_configs()``). [] when they cannot be read."""
    call = decorator_call(kfn, "triton.autotune")
    if call is None:
        return None
    cfg = configs_arg(call)
    if isinstance(cfg, cst.List) or module is not None:
        return expand_configs(cfg, module), call
    return [], call


def _config_values(c: cst.BaseExpression, env: dict[str, int]) -> dict[str, int] | None:
    """``triton.Config({"BLOCK": 64, "G": g}, num_warps=w)`` as values, names read from ``env``."""
    if not (isinstance(c, cst.Call) and dotted(c.func).endswith("Config")):
        return None

    def val(e: cst.BaseExpression) -> int | None:
        if isinstance(e, cst.Integer):
            return int(e.value, 0)
        return env.get(e.value) if isinstance(e, cst.Name) else None

    out: dict[str, int] = {}
    if c.args and isinstance(c.args[0].value, cst.Dict) and c.args[0].keyword is None:
        for de in c.args[0].value.elements:
            if isinstance(de, cst.DictElement) and isinstance(de.key, cst.SimpleString) and val(de.value) is not None:
                out[de.key.evaluated_value] = val(de.value)
    for a in c.args:
        if a.keyword is not None and a.keyword.value in OPTIONS and val(a.value) is not None:
            out[a.keyword.value] = val(a.value)
    return out


def _bindings(target: cst.BaseExpression, item: cst.BaseExpression) -> dict[str, int] | None:
    if isinstance(target, cst.Name):
        return {target.value: int(item.value, 0)} if isinstance(item, cst.Integer) else {}
    if isinstance(target, cst.Tuple) and isinstance(item, cst.Tuple) and len(target.elements) == len(item.elements):
        out: dict[str, int] = {}
        for t, v in zip(target.elements, item.elements):
            b = _bindings(t.value, v.value)
            if b is None:
                return None
            out.update(b)
        return out
    return None


def _module_value(name: str, module: cst.Module | None) -> cst.BaseExpression | None:
    """What a module-level name is bound to by its one assignment, else None."""
    vals = assignments(module.body).get(name, []) if module is not None else []
    return vals[0][1] if len(vals) == 1 and vals[0][0] and isinstance(vals[0][1], cst.BaseExpression) else None


def _literal_items(e: cst.BaseExpression, module: cst.Module | None, depth: int = 0) -> list | None:
    """The elements a comprehension iterates: a list or tuple display, a module-level name bound to one
    (``NUM_WARPS = [2, 4, 8]``), both sides of a conditional (``[64, 128] if big else [32, 64]``), or lists joined
    with ``+`` (``[1, 2, 4] + ([] if hopper else [8])``, as FLA writes them)."""
    if depth > 4:
        return None
    if isinstance(e, (cst.List, cst.Tuple)):
        return [el.value for el in e.elements]
    if isinstance(e, cst.Name):
        v = _module_value(e.value, module)
        return _literal_items(v, module, depth + 1) if v is not None else None
    if isinstance(e, cst.IfExp):
        parts = (e.body, e.orelse)
    elif isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        parts = (e.left, e.right)
    else:
        return None
    a, b = (_literal_items(x, module, depth + 1) for x in parts)
    return None if a is None or b is None else a + b


def expand_configs(node: cst.BaseExpression | None, module: cst.Module | None = None,
                   depth: int = 0) -> list[dict[str, int]]:
    """An autotuner's ``configs=`` read statically beyond a literal list: a comprehension over literal lists, lists
    bound to module-level names or a conditional of two lists (``[triton.Config({"BT": bt}, num_warps=w) for bt in
    [16, 32] for w in NUM_WARPS]``; an ``if`` filter is ignored: the keys are what matter), lists joined with ``+``,
    and, given the module, a module-level name bound to one or an argument-free module-level function returning one
    (``configs=get_autotune_config()``). [] when unknown."""
    if node is None or depth > 4:
        return []
    if isinstance(node, cst.List):
        out = []
        for el in node.elements:
            if isinstance(el, cst.StarredElement):
                out += expand_configs(el.value, module, depth + 1)
            elif (v := _config_values(el.value, {})) is not None:
                out.append(v)
        return out
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return expand_configs(node.left, module, depth + 1) + expand_configs(node.right, module, depth + 1)
    if isinstance(node, cst.ListComp):
        envs: list[dict[str, int]] = [{}]
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            items = _literal_items(comp.iter, module)
            if items is None:
                return []
            nxt = []
            for env in envs:
                for it in items:
                    b = _bindings(comp.target, it)
                    if b is None:
                        return []
                    nxt.append({**env, **b})
            envs = nxt[:4096]
            comp = comp.inner_for_in
        return [v for env in envs if (v := _config_values(node.elt, env)) is not None]
    if module is None:
        return []
    if isinstance(node, cst.Name):
        v = _module_value(node.value, module)
        return expand_configs(v, module, depth + 1) if v is not None else []
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and not node.args:
        fn = next((st for st in module.body if isinstance(st, cst.FunctionDef) and st.name.value == node.func.value),
                  None)
        rets = returns(fn) if fn is not None else []
        return expand_configs(rets[0], module, depth + 1) if len(rets) == 1 else []
    return []


def heuristic_keys(kfn: cst.FunctionDef) -> list[str]:
    keys = []
    for d in kfn.decorators:
        if isinstance(d.decorator, cst.Call) and dotted(d.decorator.func).endswith("heuristics") and d.decorator.args:
            v = d.decorator.args[0].value
            if isinstance(v, cst.Dict):
                keys += [el.key.evaluated_value for el in v.elements
                         if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)]
    return keys
