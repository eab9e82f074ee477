"""Kernel launches (``kernel[grid](...)``) in the host functions of a task, each with its arguments bound to the
kernel's parameters, its launch options and its grid (``LaunchSite``)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.cst_util import _cached, _calls_index, dotted, function, jit_functions, param_names


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


def host_functions(module: cst.Module) -> list[cst.FunctionDef]:
    """The module's top-level functions that are not kernels: launch() and the helpers (real launchers wrap their
    kernels: every third-party corpus task launches from a helper)."""
    jit = jit_functions(module)
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value not in jit]


def host_launch_sites(module: cst.Module) -> list[tuple[cst.FunctionDef, LaunchSite]]:
    """Kernel launches in every top-level host function (launch() and the helpers it calls), in source order."""
    jit = jit_functions(module)
    return [(s, site) for s in host_functions(module) for site in function_launch_sites(s, jit)]


def visit_hosts(module: cst.Module, hosts: list[cst.FunctionDef], transformer: cst.CSTTransformer,
                replace: dict[int, cst.CSTNode] | None = None) -> cst.Module:
    """``module`` with each host function of ``hosts`` (those holding the launches a rewrite changes: launch() or
    a helper it calls) visited by ``transformer``, and the top-level statements in ``replace`` (by identity: a
    rewritten kernel) put in place."""
    new = {id(h): h.visit(transformer) for h in {id(h): h for h in hosts}.values()}
    new.update(replace or {})
    return module.with_changes(body=[new.get(id(s), s) for s in module.body])


def launch_sites_in(module: cst.Module, launch: cst.FunctionDef) -> list[LaunchSite]:
    """Kernel launches in one host function of ``module``."""
    return function_launch_sites(launch, jit_functions(module))
