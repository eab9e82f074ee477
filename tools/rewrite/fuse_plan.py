"""Which launch chains can fuse (``fuse_launches``): two top-level launches of launch() joined by a temporary
that launch() allocates itself (``torch.empty``/``empty_like``), does not return and uses otherwise only for shape
queries, that the producer only stores and the consumer only loads; the chain's kind (flat, epilogue, prologue)
from the kernels' shapes (``fuse_shapes``)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.cst_util import (
    assigned_names,
    code_of,
    dotted,
    jit_functions,
    param_names,
)
from tritondx.tools.rewrite.launch_sites import (
    LaunchSite,
    function_launch_sites,
    host_functions,
)
from tritondx.tools.rewrite.fuse_shapes import flat_kernel, single_assign
from tritondx.tools.rewrite.ptr_access import ptr_accesses


def temp_alloc(launch: cst.FunctionDef, name: str) -> cst.Call | None:
    """The single ``name = torch.empty(...)/empty_like(...)`` allocation of a temporary."""
    found = []
    for st in launch.body.body:
        a = single_assign(st)
        if a and a[0] == name:
            found.append(a[1])
    if len(found) != 1 or name in _assigned_elsewhere(launch, name):
        return None
    v = found[0]
    if isinstance(v, cst.Call) and dotted(v.func) in ("torch.empty", "torch.empty_like"):
        return v
    return None


def _assigned_elsewhere(launch: cst.FunctionDef, name: str) -> set[str]:
    n = 0
    for st in launch.body.body:
        if name in assigned_names(st):
            n += 1
    return {name} if n > 1 else set()


SHAPE_USES = ("numel", "shape", "stride", "size", "dtype", "device", "dim")


def temp_uses_ok(launch: cst.FunctionDef, temp: str, sites: list[LaunchSite]) -> bool:
    """T is used only by its allocation, the two launches, and shape queries; never returned."""
    call_ids = {id(s.call) for s in sites}
    bad = [False]

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> bool:
            if id(n) in call_ids:
                return False
            if dotted(n.func) in ("torch.empty_like", "torch.zeros_like") and n.args and \
                    isinstance(n.args[0].value, cst.Name) and n.args[0].value.value == temp:
                for a in n.args[1:]:
                    a.visit(self)
                return False
            return True

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == temp:
                if n.attr.value not in SHAPE_USES:
                    bad[0] = True
                return False
            return True

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            return False

        def visit_Name(self, n: cst.Name) -> None:
            if n.value == temp:
                bad[0] = True

    launch.body.visit(V())
    return not bad[0]


def ptr_for(site: LaunchSite, temp: str) -> str | None:
    hits = [p for p, e in site.bound.items() if isinstance(e, cst.Name) and e.value == temp]
    return hits[0] if len(hits) == 1 else None


@dataclass
class Plan:
    kind: str
    producer: LaunchSite
    consumer: LaunchSite
    temp: str
    stored_args: tuple[str, ...] = ()
    #: the host function both launches are in (launch(), or a helper it calls)
    host: str = "launch"


def plan_chains(module: cst.Module) -> list[Plan]:
    """Producer -> consumer chains of two launches in one host function (launch() or a helper it calls)."""
    kernels = jit_functions(module)
    plans = []
    for launch in host_functions(module):
        plans += _chains(launch, function_launch_sites(launch, kernels), kernels)
    return plans


def _chains(launch: cst.FunctionDef, sites: list[LaunchSite], kernels: dict[str, cst.FunctionDef]) -> list[Plan]:
    plans = []
    for i, prod in enumerate(sites):
        for cons in sites[i + 1:]:
            if not (prod.top_level and cons.top_level) or prod.kernel == cons.kernel:
                continue
            temps = {e.value for e in prod.bound.values() if isinstance(e, cst.Name)} & \
                    {e.value for e in cons.bound.values() if isinstance(e, cst.Name)}
            for temp in sorted(temps):
                alloc = temp_alloc(launch, temp)
                if alloc is None or not temp_uses_ok(launch, temp, sites):
                    continue
                p1, p2 = ptr_for(prod, temp), ptr_for(cons, temp)
                if not p1 or not p2:
                    continue
                k1, k2 = kernels[prod.kernel], kernels[cons.kernel]
                l1, s1, o1 = ptr_accesses(k1, p1)
                l2, s2, o2 = ptr_accesses(k2, p2)
                if l1 or len(s1) != 1 or o1 or s2 or len(l2) != 1 or o2:
                    continue
                f1, f2 = flat_kernel(k1), flat_kernel(k2)
                if f1 and f2:
                    kind = "flat"
                elif f2 and not f1:
                    kind = "epilogue"
                elif f1 and not f2:
                    kind = "prologue"
                else:
                    continue
                stored = tuple(code_of(prod.bound[p]) for p in param_names(k1) if p in prod.bound and
                               isinstance(prod.bound[p], cst.Name) and ptr_accesses(k1, p)[1])
                plans.append(Plan(kind, prod, cons, temp, stored, launch.name.value))
    return plans
