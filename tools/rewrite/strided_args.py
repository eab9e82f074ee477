"""Wrapper copies dropped where the kernel already indexes with the copy's strides.

``y = x.permute(0, 2, 1).contiguous()`` before ``kernel[grid](y, ..., y.stride(0), y.stride(1), ...)`` reads and
writes the whole tensor once more only to give the kernel a dense layout. When the kernel addresses that
pointer only through the strides the launcher passes (``y.stride(k)``: every tl.load/tl.store whose address
uses the pointer also uses one of those stride parameters) and the launcher uses ``y`` for nothing but the
launch and its metadata (strides, shape, dtype, device), the view itself does: ``y = x.permute(0, 2, 1)``, whose
strides the same ``y.stride(k)`` calls now report. A kernel that indexes the pointer with flat offsets (it
assumes the dense layout) is left alone.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    calls_named,
    code_of,
    host_launch_sites,
    jit_functions,
    names_in,
    parse,
    replace_nodes,
)
from tritondx.tools.evidence.triage_patterns import layout_copy

METADATA = ("stride", "shape", "size", "dtype", "device", "dim", "numel", "element_size", "ndim")


def _uses(host: cst.FunctionDef, name: str) -> list[cst.CSTNode]:
    """Every expression that reads ``name`` (its parent attribute/call when it is ``name.attr``)."""
    found: list[cst.CSTNode] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == name:
                found.append(n)
                return False
            return True

        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            return False

    host.visit(V())
    return found


def strided_source(source: str) -> tuple[str, list[str]] | None:
    module = parse(source)
    kernels = jit_functions(module)
    repl, done = {}, []
    for host in {id(h): h for h, _ in host_launch_sites(module)}.values():
        sites = [s for h, s in host_launch_sites(module) if h is host]
        for st in (s for line in host.body.body if isinstance(line, cst.SimpleStatementLine) for s in line.body):
            if not (isinstance(st, cst.Assign) and len(st.targets) == 1 and isinstance(st.targets[0].target, cst.Name)):
                continue
            name = st.targets[0].target.value
            v = st.value
            if not (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "contiguous"
                    and layout_copy(ast.parse(code_of(v), mode="eval").body)):
                continue
            args = {id(a.value) for s in sites for a in s.call.args if isinstance(a.value, cst.Name)
                    and a.value.value == name}
            uses = _uses(host, name)
            if not args or any(id(u) not in args and not (isinstance(u, cst.Attribute) and u.attr.value in METADATA)
                               for u in uses):
                continue
            ok = True
            for s in sites:
                params = [p for p, e in s.bound.items() if isinstance(e, cst.Name) and e.value == name]
                strides = {p for p, e in s.bound.items() if f"{name}.stride(" in code_of(e)}
                fn = kernels[s.kernel]
                for p in params:
                    for c in calls_named(fn, "tl.load") + calls_named(fn, "tl.store"):
                        addr = c.args[0].value if c.args else None
                        if addr is not None and p in names_in(addr) and not names_in(addr) & strides:
                            ok = False
                    if not strides or _flat_names(fn, p, strides):
                        ok = False
            if ok:
                repl[id(v)] = v.func.value
                done.append(f"{host.name.value}: {name} = {code_of(v.func.value)} (a view; no copy)")
    if not repl:
        return None
    return replace_nodes(module, repl).code, done


def _flat_names(fn: cst.FunctionDef, ptr: str, strides: set[str]) -> bool:
    """A pointer derived from ``ptr`` by an assignment that uses none of the strides (flat indexing)."""
    bad = False

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            nonlocal bad
            if ptr in names_in(n.value) and not names_in(n.value) & strides:
                bad = True

    fn.visit(V())
    return bad


@rewrite("strided_args", "a permute/transpose(...).contiguous() copy before a launch dropped when the kernel indexes "
                         "with the strides it is passed", priority=12)
def strided_args(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("strided_args")
    if not motivating:
        return []
    res = strided_source(ctx.spec.source)
    if res is None:
        return []
    src, done = res
    return [Proposal("strided_args", src, {"views": done}, "; ".join(done), [f.id for f in motivating],
                     "one read and one write of the tensor fewer per call (the copy kernel is gone); the kernel's "
                     "own accesses follow the view's strides")]
