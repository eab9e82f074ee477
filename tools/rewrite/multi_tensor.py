"""One launch per tensor of a list -> one multi-tensor launch (``multi_tensor_apply`` style).

A launcher that loops over a list of tensors and launches the same 1-D-grid kernel once per item
(``torch._foreach_*``, optimizer steps, per-parameter norms) pays a host launch (~10-20 us of Python
binding in Triton) and a GPU launch per item, and a small item cannot fill the GPU on its own. Here the
loop only *records* each launch (its program count and its arguments); after the loop one launch of a
multi-tensor version of the kernel runs every recorded item: the kernel takes each per-item argument
as a tuple (Triton specializes each element: pointer alignment and dtype per tensor), plus a tuple of
program offsets, and program ``p`` runs the original body for the item whose offset range holds ``p``,
with ``tl.program_id(0)`` replaced by ``p - start[item]``. Items are grouped at most ``MT_MAX`` per
launch (the body is instantiated once per item slot).

Preconditions (anything else gives no proposal):
- a ``for`` loop directly in launch() holds exactly one launch, as a statement of the loop body, with a
  1-tuple grid; no other loop, break, continue, return, yield or launch in the loop;
- the kernel uses only ``tl.program_id(0)`` (no other axis, no ``tl.num_programs``) and has no return;
- every constexpr and launch option of the call is loop invariant (names not assigned in the loop);
- every pointer the kernel stores to is a fresh allocation of this iteration (``torch.empty*``,
  ``zeros*``, ``full*``, ``ones*``), referenced afterwards only by ``.append(...)`` calls (so the deferred
  launches cannot be observed out of order), and lists receiving appends are not read in the loop.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.cst_util import (
    assigned_names,
    calls_named,
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    names_in,
    param_names,
    parse,
    stmt,
    stmts,
)
from tritondx.tools.rewrite.launch_sites import host_functions
from tritondx.tools.rewrite.ptr_access import ptr_accesses

MT_MAX = 16
FRESH_ALLOCS = {"torch.empty", "torch.empty_like", "torch.zeros", "torch.zeros_like", "torch.full",
                "torch.full_like", "torch.ones", "torch.ones_like", "torch.empty_strided"}
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"}


def _fresh(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    i = 2
    while f"{base}{i}" in taken:
        i += 1
    return f"{base}{i}"


def _all_names(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


def _launch_call(st: cst.BaseStatement, kernels: dict[str, cst.FunctionDef]) -> cst.Call | None:
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr):
        c = st.body[0].value
        if isinstance(c, cst.Call) and isinstance(c.func, cst.Subscript) and isinstance(c.func.value, cst.Name) \
                and c.func.value.value in kernels:
            return c
    return None


def _contains(node: cst.CSTNode, types: tuple) -> bool:
    found = [False]

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, types):
                found[0] = True
            return not found[0]

    node.visit(V())
    return found[0]


def _any_launch(node: cst.CSTNode, kernels: dict[str, cst.FunctionDef]) -> int:
    n = [0]

    class V(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            if isinstance(c.func, cst.Subscript) and isinstance(c.func.value, cst.Name) and c.func.value.value in kernels:
                n[0] += 1

    node.visit(V())
    return n[0]


def _kernel_ok(fn: cst.FunctionDef) -> bool:
    if _contains(fn.body, (cst.Return, cst.FunctionDef, cst.Yield, cst.Global, cst.Nonlocal)):
        return False
    for c in calls_named(fn, "tl.num_programs"):
        return False
    for c in calls_named(fn, "tl.program_id"):
        if len(c.args) != 1 or code_of(c.args[0].value) != "0":
            return False
    return True


def _grid_count(grid: cst.BaseExpression, body: list[cst.BaseStatement]) -> cst.BaseExpression | None:
    """The program count of a 1-D grid: ``(g,)`` inline, or a name assigned ``(g,)`` once in the loop."""
    if isinstance(grid, cst.Name):
        vals = []
        for st in body:
            if isinstance(st, cst.SimpleStatementLine):
                for s in st.body:
                    if isinstance(s, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == grid.value
                                                         for t in s.targets):
                        vals.append(s.value)
        if len(vals) != 1:
            return None
        grid = vals[0]
    if isinstance(grid, cst.Tuple) and len(grid.elements) == 1 and not isinstance(grid.elements[0], cst.StarredElement):
        return grid.elements[0].value
    return None


def _is_append(st: cst.BaseStatement) -> tuple[str, list[str]] | None:
    """``lst.append(a, ...)`` as a statement -> (lst, names in the args)."""
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr):
        c = st.body[0].value
        if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "append" and \
                isinstance(c.func.value, cst.Name):
            return c.func.value.value, sorted(set().union(*[_all_names(a.value) for a in c.args]))
    return None


class _PidSubst(cst.CSTTransformer):
    def __init__(self, repl: str):
        self.repl = repl

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted(updated.func) == "tl.program_id":
            return expr(self.repl)
        return updated


def _multi_kernel(fn: cst.FunctionDef, new_name: str, per_item: list[str]) -> cst.FunctionDef:
    """The kernel with each per-item parameter a tuple, one body instance per item slot."""
    taken = _all_names(fn)
    pid = _fresh("_mt_pid", taken)
    it = _fresh("_mt_i", taken)
    start = _fresh("_mt_start", taken)
    count = _fresh("MT_N", taken)
    tup = {p: _fresh(f"{p}_mt", taken | {pid, it, start, count}) for p in per_item}
    body = [s.visit(_PidSubst(f"({pid} - {start}[{it}])")) for s in fn.body.body]
    unpack = "".join(f"            {p} = {tup[p]}[{it}]\n" for p in per_item)
    inner = cst.Module(body=body).code
    inner = "".join(("            " + ln if ln.strip() else ln) + "\n" for ln in inner.splitlines())
    code = (f"def {new_name}():\n"
            f"    {pid} = tl.program_id(0)\n"
            f"    for {it} in tl.static_range({count}):\n"
            f"        if ({pid} >= {start}[{it}]) & ({pid} < {start}[{it} + 1]):\n"
            f"            # item {it}: program {pid} - {start}[{it}] of the original launch for that item\n"
            f"{unpack}{inner}")
    new_fn = cst.parse_module(code).body[0]
    # parameters: per-item ones renamed to their tuples (order kept), program offsets before the constexprs
    params: list[cst.Param] = []
    inserted = False
    constexprs = set(constexpr_names(fn))
    for prm in fn.params.params:
        n = prm.name.value
        if n in constexprs and not inserted:
            params.append(cst.Param(cst.Name(start)))
            inserted = True
        params.append(prm.with_changes(name=cst.Name(tup[n])) if n in tup else prm)
    if not inserted:
        params.append(cst.Param(cst.Name(start)))
    params.append(cst.Param(cst.Name(count), annotation=cst.Annotation(expr("tl.constexpr"))))
    params = [p.with_changes(comma=cst.MaybeSentinel.DEFAULT) for p in params]
    return fn.with_changes(name=cst.Name(new_name), params=fn.params.with_changes(params=params),
                           body=new_fn.body)


HOST = '''
def {helper}(calls, **meta):
    # one launch of {mt} per group of up to {cap} recorded ({kernel}) launches: per-item arguments as tuples,
    # each item's programs at [start[i], start[i + 1])
    calls = [c for c in calls if c[0] > 0]
    for c0 in range(0, len(calls), {cap}):
        chunk = calls[c0:c0 + {cap}]
        starts = [0]
        for g, _ in chunk:
            starts.append(starts[-1] + int(g))
        cols = [tuple(c[1][j] for c in chunk) for j in range(len(chunk[0][1]))]
        {mt}[(starts[-1],)](*cols, tuple(starts), MT_N=len(chunk), **meta)
'''


def plan_multi_tensor(source: str) -> list[tuple[str, str]]:
    """[(new source, kernel)] for each loop of launches that can become multi-tensor launches."""
    module = parse(source)
    kernels = jit_functions(module)
    out = []
    # the loops of launch() and of the other host functions (a loop of launches is often a library function's)
    for launch, li, loop in [(h, i, st) for h in host_functions(module) for i, st in enumerate(h.body.body)]:
        if not isinstance(loop, cst.For) or loop.orelse is not None or loop.asynchronous is not None:
            continue
        body = list(loop.body.body)
        if _any_launch(loop, kernels) != 1 or _contains(loop.body, (cst.For, cst.While, cst.Break, cst.Continue,
                                                                    cst.Return, cst.Yield, cst.FunctionDef)):
            continue
        idx = next((i for i, st in enumerate(body) if _launch_call(st, kernels)), None)
        if idx is None:
            continue
        call = _launch_call(body[idx], kernels)
        kname = call.func.value.value
        kfn = kernels[kname]
        if not _kernel_ok(kfn) or len(call.func.slice) != 1:
            continue
        g = _grid_count(call.func.slice[0].slice.value, body)
        if g is None:
            continue
        params = param_names(kfn)
        constexprs = constexpr_names(kfn)
        per_item = [p for p in params if p not in constexprs]
        bound: dict[str, cst.BaseExpression] = {}
        meta: dict[str, cst.BaseExpression] = {}
        ok = True
        for i, a in enumerate(call.args):
            if a.star:
                ok = False
            elif a.keyword is None:
                if i >= len(params):
                    ok = False
                else:
                    bound[params[i]] = a.value
            elif a.keyword.value in params:
                bound[a.keyword.value] = a.value
            elif a.keyword.value in LAUNCH_OPTIONS:
                meta[a.keyword.value] = a.value
            else:
                ok = False
        if not ok or set(bound) != set(params):
            continue
        for p in constexprs:
            meta[p] = bound[p]
        loop_assigned = assigned_names(loop.body) | assigned_names(loop.target)
        if any(names_in(e) & loop_assigned for e in meta.values()):
            continue
        # outputs: fresh allocations of this iteration, used afterwards only by appends
        stored = []
        for p in per_item:
            _, stores, _ = ptr_accesses(kfn, p)
            if stores:
                stored.append(p)
        if not stored:
            continue
        allocs: dict[str, int] = {}
        for i, st in enumerate(body[:idx]):
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign):
                a = st.body[0]
                if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and \
                        isinstance(a.value, cst.Call) and dotted(a.value.func) in FRESH_ALLOCS:
                    allocs[a.targets[0].target.value] = i
        out_names = []
        for p in stored:
            e = bound[p]
            if not isinstance(e, cst.Name) or e.value not in allocs:
                ok = False
                break
            out_names.append(e.value)
        if not ok or len(set(out_names)) != len(out_names):
            continue
        appended_lists = set()
        for st in body[idx + 1:]:
            ap = _is_append(st)
            if ap is None:
                ok = False
                break
            appended_lists.add(ap[0])
        if not ok:
            continue
        # the outputs (and the lists they go to) are not used anywhere else in the loop
        others = [st for i, st in enumerate(body) if i != idx and i not in {allocs[n] for n in out_names}
                  and _is_append(st) is None]
        used = set()
        for st in others:
            used |= _all_names(st)
        for n in out_names:
            for e in call.args:
                if e.keyword is None or e.keyword.value in params:
                    if n in _all_names(e.value) and not (isinstance(e.value, cst.Name) and e.value.value == n):
                        ok = False
        if not ok or used & (set(out_names) | appended_lists) or \
                any(n in _all_names(loop.iter) for n in appended_lists | set(out_names)):
            continue
        # build
        taken = _all_names(module)
        mt_name = _fresh(f"{kname}_mt", taken)
        helper = _fresh(f"_mt_launch_{kname}", taken | {mt_name})
        calls_var = _fresh("_mt_calls", taken | {mt_name, helper})
        new_kernel = _multi_kernel(kfn, mt_name, per_item)
        record = stmt(f"{calls_var}.append(({code_of(g)}, ({', '.join(code_of(bound[p]) for p in per_item)},)))")
        new_body = body[:idx] + [record] + body[idx + 1:]
        new_loop = loop.with_changes(body=loop.body.with_changes(body=new_body))
        meta_src = ", ".join(f"{k}={code_of(v)}" for k, v in meta.items())
        after = stmt(f"{helper}({calls_var}{', ' if meta_src else ''}{meta_src})")
        lbody = list(launch.body.body)
        lbody[li:li + 1] = [stmt(f"{calls_var} = []"), new_loop, after]
        new_launch = launch.with_changes(body=launch.body.with_changes(body=lbody))
        host = stmts(HOST.format(helper=helper, mt=mt_name, kernel=kname, cap=MT_MAX))
        host = [h.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]) for h in host]
        new_launch = new_launch.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        mbody = []
        for s in module.body:
            if s is kfn:
                mbody.append(s)
                mbody.append(new_kernel)
            elif s is launch:
                mbody.extend(host)
                mbody.append(new_launch)
            else:
                mbody.append(s)
        new_module = module.with_changes(body=mbody)
        # the single-item kernel is no longer launched: drop it when nothing else refers to it
        rest = [s for s in new_module.body if s is not kfn]
        if kname not in _all_names(cst.Module(body=rest)):
            new_module = new_module.with_changes(body=rest)
        out.append((new_module.code, kname))
    return out
