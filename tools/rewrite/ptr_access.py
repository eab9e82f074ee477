"""The loads and stores of a Triton kernel that address through one pointer parameter (and whether it is used
any other way): read by launch fusion (``fuse_plan``, ``fuse_build``) and the multi-tensor launch
(``multi_tensor``)."""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.cst_util import calls_named, names_in


def ptr_accesses(fn: cst.FunctionDef, ptr: str) -> tuple[list[cst.Call], list[cst.Call], bool]:
    """(loads, stores) whose address uses ``ptr``, and whether ``ptr`` is used any other way."""
    loads: list[cst.Call] = []
    stores: list[cst.Call] = []
    for c in calls_named(fn, "tl.load"):
        if c.args and ptr in names_in(c.args[0].value):
            loads.append(c)
    for c in calls_named(fn, "tl.store") + calls_named(fn, "tl.atomic_add"):
        if c.args and ptr in names_in(c.args[0].value):
            stores.append(c)
    other = False
    counted = sum(1 for c in loads + stores)
    total = [0]

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == ptr:
                total[0] += 1

        def visit_Param(self, n: cst.Param) -> bool:
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == ptr and n.attr.value == "dtype":
                return False   # ptr.dtype.element_ty: a type, not an access
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    fn.body.visit(V())
    if total[0] != counted:
        other = True
    return loads, stores, other
