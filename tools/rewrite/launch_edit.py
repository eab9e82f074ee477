"""Setting launch values where they are defined (the definitions ``launches.py`` finds).

``set_values(source, {kernel: {param: value}})`` writes each value in place (a call literal, a local, a signature
default, a module constant, a dict entry, a helper's return, the kernel's default, an autotune config pinned to one
configuration), or forks a new local in the launching function when the definition is shared with a launch whose
value is not meant to change; computed or unset num_warps / num_stages are written at the call.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.cst_util import add_call_kwargs, dotted, param_names, stmt
from tritondx.tools.rewrite.launch_scan import OPTIONS, autotune_configs, free_names
from tritondx.tools.rewrite.launch_resolve import _Def, _Site
from tritondx.tools.rewrite.launches import (
    _all_calls,
    _analysis,
    _key,
    _other_uses,
    _Result,
    _task_dtypes,
    _unreachable_launch_use,
)


class EditRefused(ValueError):
    """A value cannot be set without changing another launch or breaking a tie (the reason says which)."""


def current_values(source: str, dtypes: tuple[str, ...] | list[str] | None = None
                   ) -> dict[str, dict[str, int | None]]:
    """kernel -> {param: static value (None where computed)}, Triton's option defaults filled in."""
    out: dict[str, dict[str, int | None]] = {}
    for s in _analysis(source, tuple(dtypes) if dtypes is not None else _task_dtypes(source)).sites:
        vals = out.setdefault(s.kernel, {})
        for p, d in s.params.items():
            v = d.value if d.kind not in ("computed", "heuristic", "autotune_config") else None
            if p in vals and vals[p] != v:
                v = None          # launches of one kernel disagree: not one value
            vals[p] = v
    return out


def set_values(source: str, values: dict[str, dict[str, int]], dtypes: tuple[str, ...] | list[str] | None = None
               ) -> str:
    """``source`` with each launch of each kernel in ``values`` getting those constexpr / option values.

    Each value is written where it is defined (call literal, local, signature default, module constant, dict
    entry, helper return, kernel default, autotune config); a definition that another launch also uses (one
    not set to the same value here) is left as it is and the launch gets a new local instead. Options
    (num_warps, num_stages) that are computed or unset are written at the call. Raises ``EditRefused``.
    """
    res = _analysis(source, tuple(dtypes) if dtypes is not None else _task_dtypes(source))
    sites = [s for s in res.sites if s.kernel in values]
    if not sites:
        raise EditRefused("no launch of " + ", ".join(values))
    repl: dict[int, cst.CSTNode] = {}
    call_kwargs: dict[int, dict[str, cst.BaseExpression]] = {}
    inserts: dict[int, list[cst.BaseStatement]] = {}
    deco_edits: dict[int, cst.Call] = {}
    intended = {(id(s), p) for s in sites for p in values[s.kernel]}
    by_def: dict[object, list[tuple[_Site, str, int]]] = {}
    taken = set(res.names)
    pinned: set[str] = set()
    for kname in values:
        ks = [s for s in sites if s.kernel == kname]
        auto = autotune_configs(ks[0].kfn, res.an.module) if ks else None
        if auto is None:
            continue
        # an autotuned kernel: its configs hold the tuned constexprs and the options; it is pinned to one
        tuned = {p: v for p, v in values[kname].items()
                 if p in OPTIONS or (ks[0].params.get(p) is not None and ks[0].params[p].kind == "autotune_config")}
        if tuned:
            deco_edits[id(auto[1])] = _pinned(auto, tuned)
            pinned.add(kname)
    for s in sites:
        for p, v in values[s.kernel].items():
            d = s.params.get(p)
            if d is None:
                raise EditRefused(f"{s.kernel} takes no {p}")
            if s.kernel in pinned and (p in OPTIONS or d.kind == "autotune_config"):
                continue
            if d.kind in ("computed", "unset", "heuristic") or d.node is None or d.value is None:
                if p in OPTIONS:
                    call_kwargs.setdefault(id(s.call), {})[p] = cst.Integer(str(v))
                    continue
                raise EditRefused(f"{s.kernel}.{p} is {d.kind} ({'; '.join(d.chain)})")
            by_def.setdefault(_key(d), []).append((s, p, v))
    for key, uses in by_def.items():
        d = uses[0][0].params[uses[0][1]]
        wanted = {v for _, _, v in uses}
        others = [(o, q) for o, q in res.users.get(key, [])
                  if (id(o), q) not in intended and not (q == "grid" and any(o is u[0] for u in uses))]
        if len(wanted) == 1 and not others and not _unreachable_launch_use(res, d):
            v = wanted.pop()
            repl[id(d.node)] = cst.Integer(str(v))
            if d.kind == "literal":       # a call literal: cdiv divisors of the same value in its grid move with it
                for s, _, _ in uses:
                    for n in _cdiv_divisors(s.grid_value, d.value):
                        repl[id(n)] = cst.Integer(str(v))
            continue
        if _other_uses(res, d):
            raise EditRefused(f"{d.name or d.kind} is shared with another launch and read elsewhere")
        for s, p, v in uses:
            _fork(s, p, v, d, res, repl, inserts, taken)
    changed = repl or call_kwargs or inserts or deco_edits
    if not changed:
        return source

    def change(original, updated):
        if id(original) in repl:
            return repl[id(original)]
        if id(original) in deco_edits:
            return deco_edits[id(original)]
        if id(original) in call_kwargs and isinstance(updated, cst.Call):
            return add_call_kwargs(updated, call_kwargs[id(original)])
        if id(original) in inserts and isinstance(updated, cst.FunctionDef):
            body = list(updated.body.body)
            at = 1 if body and _is_docstring(body[0]) else 0
            body[at:at] = inserts[id(original)]
            return updated.with_changes(body=updated.body.with_changes(body=body))
        return updated

    return res.edit(set(repl) | set(deco_edits) | set(call_kwargs) | set(inserts), change)


def _fork(s: _Site, p: str, v: int, d: _Def, res: _Result, repl: dict, inserts: dict, taken: set[str]) -> None:
    """Give launch ``s`` its own local for ``p`` (its argument and its grid's reads of the definition)."""
    if isinstance(s.grid_node, cst.Name) and s.grid_value is not s.grid_node:
        users = [o for o in res.sites if isinstance(o.grid_node, cst.Name) and o.grid_node.value == s.grid_node.value
                 and o.scope.fn is s.scope.fn and o.call is not s.call]
        if users:
            raise EditRefused(f"grid {s.grid_node.value} is shared with another launch")
    arg = _arg_node(s, p)
    if arg is None:
        raise EditRefused(f"{s.kernel}.{p} is not passed at the call")
    base = (d.name or p).split("[")[0]
    name = next(f"{base}_{i}" for i in range(2, 999) if f"{base}_{i}" not in taken)
    taken.add(name)
    repl[id(arg)] = cst.Name(name)
    if s.grid_value is not None:
        for n in _names(s.grid_value):
            gd = res.an.resolve(n, s.grid_scope or s.scope, s.line) if n.value in free_names(s.grid_value) else None
            if gd is not None and _key(gd) == _key(d):
                repl[id(n)] = cst.Name(name)
    inserts.setdefault(id(s.scope.fn), []).append(stmt(f"{name} = {v}"))


def _arg_node(s: _Site, p: str) -> cst.BaseExpression | None:
    params = param_names(s.kfn)
    positional = [a for a in s.call.args if a.keyword is None and not a.star]
    for a in s.call.args:
        if a.keyword is not None and a.keyword.value == p:
            return a.value
    if p in params and params.index(p) < len(positional):
        return positional[params.index(p)].value
    return None


def _names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return out


def _cdiv_divisors(grid: cst.CSTNode | None, value: int | None) -> list[cst.Integer]:
    if grid is None or value is None:
        return []
    return [c.args[1].value for c in _all_calls(grid) if dotted(c.func) in ("triton.cdiv", "cdiv")
            and len(c.args) == 2 and isinstance(c.args[1].value, cst.Integer) and int(c.args[1].value.value, 0) == value]


def _is_docstring(st: cst.BaseStatement) -> bool:
    return isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr) \
        and isinstance(st.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _pinned(auto: tuple[list[dict[str, int]], cst.Call], values: dict[str, int]) -> cst.Call:
    """The autotune decorator reduced to one configuration: the first one with ``values`` set."""
    configs, call = auto
    if not configs:
        raise EditRefused("autotune configs are not read statically")
    base = {**configs[0], **values}
    consts = ", ".join(f'"{k}": {v}' for k, v in base.items() if k not in OPTIONS)
    opts = "".join(f", {k}={base[k]}" for k in OPTIONS if k in base)
    new = cst.parse_expression(f"[triton.Config({{{consts}}}{opts})]")
    args = []
    for i, a in enumerate(call.args):
        if (a.keyword is not None and a.keyword.value == "configs") or (i == 0 and a.keyword is None):
            a = a.with_changes(value=new)
        args.append(a)
    return call.with_changes(args=args)
