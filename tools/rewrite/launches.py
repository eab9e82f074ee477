"""Every Triton launch reachable from ``launch()``, and where each of its launch values is defined.

Static (libcst only: task code never runs here). From ``launch()`` the analysis follows calls into the
task file's functions (helpers, nested helpers, any depth up to ``MAX_DEPTH``), binding each call's
arguments to the callee's parameters, and records every ``kernel[grid](...)`` it meets: the kernel may be
named directly, through a local bound to it (``k = my_kernel; k[grid](...)``) or through a parameter a
caller bound to it. For each constexpr the kernel takes, for ``num_warps`` / ``num_stages`` and for the grid
it records the *definition* of the value, followed through locals, parameters (the caller's argument or
the signature default), module constants, tuple-unpacked helper returns (``BLOCK, num_warps =
calculate_settings(n)``), dict literals (``configs[dtype]["BLOCK_M"]``), ``@triton.autotune`` configs,
``@triton.heuristics`` and the kernel's own defaults; and which other launches use the same definition.

``analyze(source)`` gives pydantic records (``launch_records``: ``LaunchSite``, ``ParamDef``, ``GridDef``), resolved
in ``launch_resolve``; ``launch_edit.set_values`` writes values where they are defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import libcst as cst
from tritondx.tools.rewrite.cst_util import code_of, dotted, is_jit
from tritondx.tools.rewrite.launch_records import GridDef, LaunchAnalysis, LaunchSite, ParamDef
from tritondx.tools.rewrite.launch_resolve import _Analyzer, _Def, _Site
from tritondx.tools.rewrite.launch_scan import (
    all_params,
    autotune_configs,
    fn_assignments,
    free_names,
    heuristic_keys,
    meta_keys,
    top_defs,
)


EDITABLE_KINDS = ("literal", "local", "signature_default", "module_constant", "dict_entry", "helper_return",
                  "kernel_default")


def _key(d: _Def):
    if d.node is not None:
        return id(d.node)
    if d.kind in ("autotune_config", "heuristic"):
        return (d.kind, id(d.kernel_fn), d.name)
    return None


@dataclass
class _Result:
    an: _Analyzer
    sites: list[_Site]
    users: dict[object, list[tuple[_Site, str]]]    # def key -> (site, param or "grid")
    reads: dict[tuple, list[cst.Name]]               # carrier -> Name reads of it
    site_nodes: set[int]                             # ids of nodes inside reachable launch calls and grids
    unreachable_launch_reads: set[int]               # ids of Name nodes read by launches analysis did not reach

    @cached_property
    def names(self) -> frozenset[str]:
        """Every identifier the module uses (a new local must not shadow one)."""
        out: set[str] = set()

        class V(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                out.add(n.value)

        self.an.module.visit(V())
        return frozenset(out)

    @cached_property
    def parents(self) -> dict[int, int]:
        """id(node) -> id(its parent) over the module (an edit visits only the paths to what it changes)."""
        out: dict[int, int] = {}
        stack: list[int] = []

        class V(cst.CSTVisitor):
            def on_visit(self, n) -> bool:
                if stack:
                    out[id(n)] = stack[-1]
                stack.append(id(n))
                return True

            def on_leave(self, n) -> None:
                stack.pop()

        self.an.module.visit(V())
        return out

    def edit(self, targets: set[int], fn) -> str:
        """The module's code with ``fn(original, updated)`` applied to each node whose id ``targets`` holds
        (only the ancestors of a target have their children visited)."""
        up: set[int] = set()
        for t in targets:
            p = self.parents.get(t)
            while p is not None and p not in up:
                up.add(p)
                p = self.parents.get(p)

        class T(cst.CSTTransformer):
            def on_visit(self, n) -> bool:
                return id(n) in up

            def on_leave(self, original, updated):
                return fn(original, updated) if id(original) in targets else updated

        return self.an.module.visit(T()).code


@lru_cache(maxsize=64)
def _analysis(source: str, dtypes: tuple[str, ...] = ()) -> _Result:
    an = _Analyzer(source, dtypes)
    an.run()
    users: dict[object, list] = {}
    for s in an.sites:
        for p, d in s.params.items():
            k = _key(d)
            if k is not None:
                users.setdefault(k, []).append((s, p))
        for d in s.grid_defs:
            k = _key(d)
            if k is not None and (s, "grid") not in users.get(k, []):
                users.setdefault(k, []).append((s, "grid"))
    site_nodes: set[int] = set()
    for s in an.sites:
        for n in (s.call, s.grid_value):
            if n is not None:
                site_nodes |= _node_ids(n)
    reached = {id(s.call) for s in an.sites}
    unreachable: set[int] = set()
    for fn in an.functions.values():
        if is_jit(fn):
            continue
        for c in _all_calls(fn):
            if isinstance(c.func, cst.Subscript) and dotted(c.func.value) in an.kernels and id(c) not in reached:
                unreachable |= _node_ids(c)
    return _Result(an, an.sites, users, _carrier_reads(an), site_nodes, unreachable)


def _node_ids(node: cst.CSTNode) -> set[int]:
    out: set[int] = set()

    class V(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            out.add(id(n))
            return True

    node.visit(V())
    return out


def _all_calls(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(V())
    return out


def _carrier_reads(an: _Analyzer) -> dict[tuple, list[cst.Name]]:
    """(id(function) or None, name) -> the Name nodes reading it (module names: in functions that do not
    bind them themselves)."""
    out: dict[tuple, list[cst.Name]] = {}

    def reads(node, skip_bound: bool) -> dict[str, list[cst.Name]]:
        found: dict[str, list[cst.Name]] = {}

        class V(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                found.setdefault(n.value, []).append(n)

            def visit_Attribute(self, n: cst.Attribute) -> bool:
                n.value.visit(self)
                return False

            def visit_Arg(self, n: cst.Arg) -> bool:
                n.value.visit(self)
                return False

            def visit_AssignTarget(self, n) -> bool:
                return False

            def visit_Param(self, n: cst.Param) -> bool:
                if n.default is not None:
                    n.default.visit(self)
                return False

        node.visit(V())
        return found

    def visit_fn(fn: cst.FunctionDef) -> None:
        for name, ns in reads(fn.body, True).items():
            out.setdefault((id(fn), name), []).extend(ns)
        for d in top_defs(fn):
            visit_fn(d)

    for fn in an.functions.values():
        visit_fn(fn)
        for name, ns in reads(fn, True).items():
            bound = set(fn_assignments(fn)) | {p.name.value for p in all_params(fn)}
            if name not in bound:
                out.setdefault((None, name), []).extend(ns)
    for st in an.module.body:
        if not isinstance(st, cst.FunctionDef):
            for name, ns in reads(st, True).items():
                out.setdefault((None, name), []).extend(ns)
    return out


def _site_id(s: _Site, seen: dict[str, int]) -> str:
    base = f"{s.kernel}@{s.scope.qual}:{s.line}"
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}#{n}"


def analyze(source: str, dtypes: tuple[str, ...] | list[str] | None = None) -> LaunchAnalysis:
    """The launches reachable from launch() with every launch value's definition (see the module doc).
    ``dtypes`` (default: the task's DTYPES) pick the entry of a dict keyed by dtype."""
    res = _analysis(source, tuple(dtypes) if dtypes is not None else _task_dtypes(source))
    an = res.an
    seen: dict[str, int] = {}
    ids = {id(s): _site_id(s, seen) for s in res.sites}
    out = []
    for s in res.sites:
        rec = LaunchSite(id=ids[id(s)], kernel=s.kernel, function=s.scope.qual, path=list(s.scope.path),
                         line=s.line, heuristics=heuristic_keys(s.kfn))
        auto = autotune_configs(s.kfn, an.module)
        if auto is not None:
            rec.autotuned = True
            rec.autotune_configs = auto[0]
        for p, d in s.params.items():
            rec.params[p] = _param_record(res, s, p, d, ids, auto)
        if s.grid_value is not None:
            g = s.grid_value
            kind = "lambda" if isinstance(g, cst.Lambda) else "function" if isinstance(g, cst.FunctionDef) else \
                "tuple" if isinstance(g, (cst.Tuple, cst.List)) else "computed"
            rec.grid = GridDef(kind=kind, function=(s.grid_scope or s.scope).qual, line=an.line(g),
                               source=code_of(g), meta_keys=meta_keys(g), names=free_names(g))
        s.record = rec
        out.append(rec)
    return LaunchAnalysis(sites=out)


def _param_record(res: _Result, s: _Site, p: str, d: _Def, ids: dict, auto) -> ParamDef:
    an = res.an
    rec = ParamDef(param=p, kind=d.kind, function=(d.owner or (d.scope.qual if d.scope is not None else
                                                   d.kernel_fn.name.value if d.kernel_fn is not None else "<module>")),
                   name=d.name, value=d.value, chain=d.chain)
    if d.node is not None:
        rec.line, rec.col, rec.source = an.line(d.node), an.col(d.node), code_of(d.node)[:200]
    if d.kind == "autotune_config" and auto is not None:
        rec.values = sorted({c[p] for c in auto[0] if p in c})
        rec.editable = bool(auto[0])
        rec.line = an.line(auto[1])
    k = _key(d)
    users = res.users.get(k, []) if k is not None else []
    rec.grid_tied = any(o is s and q == "grid" for o, q in users)
    rec.shared_with = [f"{ids[id(o)]}:{q}" for o, q in users if o.call is not s.call]
    rec.other_uses = _other_uses(res, d)
    if d.kind in EDITABLE_KINDS and d.node is not None and d.value is not None:
        rec.editable = True
    return rec


def _other_uses(res: _Result, d: _Def) -> int:
    if d.carrier is None:
        return 0
    return sum(1 for n in res.reads.get(d.carrier, []) if id(n) not in res.site_nodes)


def _unreachable_launch_use(res: _Result, d: _Def) -> bool:
    if d.carrier is None:
        return False
    return any(id(n) in res.unreachable_launch_reads for n in res.reads.get(d.carrier, []))


def launching_functions(source: str) -> tuple[cst.Module, list[cst.FunctionDef]]:
    """The parsed module and its functions that hold a launch reachable from launch(), in the order met
    (edit that module: its nodes are the ones returned)."""
    res = _analysis(source, _task_dtypes(source))
    out: list[cst.FunctionDef] = []
    for s in res.sites:
        if all(f is not s.scope.fn for f in out):
            out.append(s.scope.fn)
    return res.an.module, out


def _task_dtypes(source: str) -> tuple[str, ...]:
    from tritondx.tools.rewrite.taskinfo import task_info
    try:
        return tuple(task_info(source).dtypes)
    except SyntaxError:
        return ()
