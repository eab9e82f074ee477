"""Wrapper copies dropped where the kernel already indexes with the copy's strides.

``y = x.permute(0, 2, 1).contiguous()`` before ``kernel[grid](y, ..., y.stride(0), y.stride(1), ...)`` reads and
writes the whole tensor once more only to give the kernel a dense layout. When the kernel addresses that
pointer only through the strides the launcher passes (``y.stride(k)``: every tl.load/tl.store whose address
uses the pointer also uses one of those stride parameters) and the launcher uses ``y`` for nothing but the
launch and its metadata (strides, shape, dtype, device), the view itself does: ``y = x.permute(0, 2, 1)``, whose
strides the same ``y.stride(k)`` calls now report. A kernel that indexes the pointer with flat offsets (it
assumes the dense layout) is left alone.

The same after the launch (:func:`out_view_source`): ``out = torch.empty((B, H, S, D), ...)`` written by a kernel
through the strides it is passed, then ``return out.transpose(1, 2).contiguous()`` (or ``.reshape(...)`` after
the permute) copies the whole output once more. The output is allocated in its final layout instead
(``_tdx_out = torch.empty(<the permuted shape>)``), the kernel writes through the view
``out = _tdx_out.transpose(1, 2)`` (its strides are what ``out.stride(k)`` now reports), and the launcher returns
``_tdx_out`` (``.reshape(...)`` of it: a view, it is contiguous). Preconditions: ``out`` allocated once with
``torch.empty`` and a literal shape tuple, used only by the launch (as the pointer and its metadata) and by that
one return, a ``transpose`` with literal dims or a ``permute`` with a literal permutation, and the kernel
addressing the pointer only through those strides.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    calls_named,
    code_of,
    dotted,
    jit_functions,
    names_in,
    parse,
    replace_nodes,
    stmts,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
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


def _layout_chain(e: cst.BaseExpression, name: str) -> tuple[list[int], list[cst.Arg] | None] | None:
    """``name.transpose(a, b).contiguous()`` / ``name.permute(p).contiguous()`` / ``....reshape(args)``: the
    permutation (dims as written) and the reshape's arguments (None for contiguous)."""
    if not (isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in
            ("contiguous", "reshape")):
        return None
    tail = list(e.args) if e.func.attr.value == "reshape" else None
    if tail is None and e.args:
        return None
    inner = e.func.value
    if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and
            isinstance(inner.func.value, cst.Name) and inner.func.value.value == name):
        return None
    vals = []
    for a in inner.args:
        if a.keyword is not None:
            return None
        v = a.value
        neg = isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus)
        v = v.expression if neg else v
        if not isinstance(v, cst.Integer):
            return None
        vals.append(-int(v.value) if neg else int(v.value))
    kind = inner.func.attr.value
    if kind == "transpose" and len(vals) == 2:
        return ["T", *vals], tail
    if kind == "permute" and vals:
        return ["P", *vals], tail
    return None


def out_view_source(source: str) -> tuple[str, list[str]] | None:
    """The output-side copy (see the module docstring) removed; None where it cannot be."""
    module = parse(source)
    kernels = jit_functions(module)
    repl, done = {}, []
    for host in {id(h): h for h, _ in host_launch_sites(module)}.values():
        sites = [s for h, s in host_launch_sites(module) if h is host]
        lines = [st for st in host.body.body]
        last = lines[-1] if lines else None
        if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and
                isinstance(last.body[0], cst.Return) and last.body[0].value is not None):
            continue
        ret = last.body[0].value
        for st in lines:
            if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                    and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name)):
                continue
            a = st.body[0]
            name = a.targets[0].target.value
            alloc = a.value
            if not (isinstance(alloc, cst.Call) and dotted(alloc.func) == "torch.empty" and alloc.args and
                    alloc.args[0].keyword is None and isinstance(alloc.args[0].value, (cst.Tuple, cst.List))):
                continue
            dims = [el.value for el in alloc.args[0].value.elements]
            chain = _layout_chain(ret, name)
            if chain is None or len(local_assignment_names(host, name)) != 1:
                continue
            (kind, *vals), tail = chain
            n = len(dims)
            vals = [v + n if v < 0 else v for v in vals]
            if any(not 0 <= v < n for v in vals):
                continue
            if kind == "T":
                perm = list(range(n))
                perm[vals[0]], perm[vals[1]] = perm[vals[1]], perm[vals[0]]
            else:
                perm = vals
                if sorted(perm) != list(range(n)):
                    continue
            inv = [perm.index(i) for i in range(n)]
            # out is used by the launch (pointer, metadata) and the return only
            args = {id(x.value) for s in sites for x in s.call.args if isinstance(x.value, cst.Name)
                    and x.value.value == name}
            uses = _uses(host, name)
            ret_uses = {id(u) for u in _uses(ret, name)} if not isinstance(ret, cst.Name) else set()
            if not args or any(id(u) not in args and id(u) not in ret_uses and
                               not (isinstance(u, cst.Attribute) and u.attr.value in METADATA) for u in uses):
                continue
            if not _strided_in_kernels(sites, kernels, name):
                continue
            final = "_tdx_" + name
            if final in names_in(host):
                continue
            new_shape = "(" + ", ".join(code_of(dims[p]) for p in perm) + ("," if n == 1 else "") + ")"
            rest = "".join(", " + code_of(x.value) if x.keyword is None else f", {x.keyword.value}={code_of(x.value)}"
                           for x in alloc.args[1:])
            view = (f"{final}.permute({', '.join(map(str, inv))})" if kind == "P" else
                    f"{final}.transpose({vals[0]}, {vals[1]})")
            new_stmts = stmts(f"{final} = torch.empty({new_shape}{rest})  # the output in its final layout\n"
                              f"{name} = {view}  # the kernel writes through this view (its strides)\n")
            repl[id(st)] = new_stmts
            back = final if tail is None else f"{final}.reshape({', '.join(code_of(x.value) for x in tail)})"
            repl[id(last)] = stmts(f"return {back}\n")
            done.append(f"{host.name.value}: {name} allocated as {final} in its final layout; "
                        f"{code_of(ret)} became {back} (no copy)")
            break
    if not repl:
        return None

    class T(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            if id(original) in repl:
                return cst.FlattenSentinel(repl[id(original)])
            return updated

    return module.visit(T()).code, done


def local_assignment_names(host: cst.FunctionDef, name: str) -> list[cst.CSTNode]:
    out = []

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            if name in names_in(n.target):
                out.append(n)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if name in names_in(n.target):
                out.append(n)

    host.visit(V())
    return out


def _strided_in_kernels(sites, kernels, name: str) -> bool:
    """Every kernel that receives ``name`` addresses it only through the ``name.stride(k)`` arguments it gets."""
    for s in sites:
        params = [p for p, e in s.bound.items() if isinstance(e, cst.Name) and e.value == name]
        if not params:
            continue
        strides = {p for p, e in s.bound.items() if f"{name}.stride(" in code_of(e)}
        fn = kernels[s.kernel]
        for p in params:
            for c in calls_named(fn, "tl.load") + calls_named(fn, "tl.store"):
                addr = c.args[0].value if c.args else None
                if addr is not None and p in names_in(addr) and not names_in(addr) & strides:
                    return False
            if not strides or _flat_names(fn, p, strides):
                return False
    return True


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
    out = []
    src = ctx.spec.source
    for fn in (strided_source, out_view_source):
        res = fn(src)
        if res is None:
            continue
        src, done = res
        out.append(Proposal("strided_args", src, {"views": done}, "; ".join(done), [f.id for f in motivating],
                            "one read and one write of the tensor fewer per call (the copy kernel is gone); the "
                            "kernel's own accesses follow the view's strides"))
    return out
