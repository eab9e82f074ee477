"""Persistent programs: a fixed number of programs loops over the tiles of a 1-D grid.

``pid = tl.program_id(0)`` and the rest of the body become

    for _tile in range(tl.program_id(0), NUM_TILES, NUM_PROGS):
        pid = _tile
        ...

and the launcher computes ``NUM_TILES`` from the original grid and launches
``NUM_PROGS = min(NUM_TILES, SMs * PER_SM)`` programs, the SM count from
``torch.cuda.get_device_properties(...).multi_processor_count`` on CUDA (4 under the interpreter, so
the loop is exercised there too). Preconditions: only ``tl.program_id(0)`` is used, once, at the top
level; no ``return``; nothing in the body reassigns a parameter or a value defined before the pid
(those would carry over between tiles); the launch grid is a 1-tuple.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    add_params,
    assigned_names,
    calls_named,
    code_of,
    dotted,
    expr,
    function,
    jit_functions,
    local_assignment,
    names_in,
    param_names,
    parse,
    stmts,
)
from tritondx.tools.rewrite.launch_sites import function_launch_sites
from tritondx.tools.rewrite.launches import launching_functions
from tritondx.tools.rewrite.matmul_templates import grouped_gemm_proposals

HELPER = '''
def _tdx_num_sms(t):
    """Streaming multiprocessors of the tensor's GPU (a small constant off-GPU, e.g. under the interpreter)."""
    if t.is_cuda:
        return torch.cuda.get_device_properties(t.device).multi_processor_count
    return 4
'''


def _pid_stmt(fn: cst.FunctionDef) -> int | None:
    pids = calls_named(fn, "tl.program_id")
    if len(pids) != 1 or code_of(pids[0].args[0].value).replace("axis=", "") != "0":
        return None
    for i, st in enumerate(fn.body.body):
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign) \
                and calls_named(st, "tl.program_id") and isinstance(st.body[0].targets[0].target, cst.Name):
            return i
    return None


def persistent_kernel(fn: cst.FunctionDef) -> cst.FunctionDef | None:
    i = _pid_stmt(fn)
    if i is None or {"NUM_TILES", "NUM_PROGS"} & set(param_names(fn)):
        return None
    has_return = [False]

    class V(cst.CSTVisitor):
        def visit_Return(self, n) -> None:
            has_return[0] = True

    fn.visit(V())
    if has_return[0]:
        return None
    body = list(fn.body.body)
    before, pid_st, rest = body[:i], body[i], body[i + 1:]
    defined_before = set(param_names(fn)) | set().union(*(assigned_names(s) for s in before)) if before else \
        set(param_names(fn))
    if set().union(*(assigned_names(s) for s in rest)) & defined_before if rest else False:
        return None
    a = pid_st.body[0]
    tile = "_tile"
    while tile in names_in(fn):
        tile = "_" + tile
    # pid = tl.program_id(0)[.to(...)]  ->  pid = _tile[.to(...)]
    new_pid = a.with_changes(value=_replace_pid(a.value, tile))
    loop = cst.For(target=cst.Name(tile), iter=expr("range(tl.program_id(0), NUM_TILES, NUM_PROGS)"),
                   body=cst.IndentedBlock(body=[pid_st.with_changes(body=[new_pid])] + rest),
                   leading_lines=pid_st.leading_lines)
    new = fn.with_changes(body=fn.body.with_changes(body=before + [loop]))
    return add_params(new, ["NUM_TILES", "NUM_PROGS"])


def _replace_pid(e: cst.BaseExpression, tile: str) -> cst.BaseExpression:
    class T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call):
            if dotted(original.func) == "tl.program_id":
                return cst.Name(tile)
            return updated

    return e.visit(T())


def _calls_in(node: cst.CSTNode) -> list[list[cst.Call]]:
    from tritondx.tools.rewrite.cst_util import _cached, _calls_index
    return list(_cached("calls", node, _calls_index).values())


def persistent_source(source: str, per_sm: dict[str, int], helper: str = HELPER,
                      count=None) -> tuple[str, list[str]]:
    """per_sm: kernel -> programs per SM. ``helper`` (a function added before ``launch``) and ``count``
    (``(tensor code, kernel, k) -> expression`` of the program count) let other targets reuse this:
    the Ascend ``grid_fold_to_cores`` family counts AI cores instead of SMs."""
    if count is None:
        def count(tensor: str, kernel: str, k: int) -> str:
            return f"_tdx_num_sms({tensor}) * {k}"
    helper_fn = cst.parse_module(helper).body[0]
    module, launchers = launching_functions(source)
    kernels = jit_functions(module)
    launch = function(module, "launch")
    if launch is None:
        return source, []
    new_fns = {}
    done = []
    # every launch reachable from launch(), with the function that makes it
    owner = {id(s.call): fn for fn in launchers for s in function_launch_sites(fn, kernels)}
    sites = [s for fn in launchers for s in function_launch_sites(fn, kernels)]
    edits: dict[int, tuple] = {}
    for name, fn in kernels.items():
        if name not in per_sm:
            continue
        new = persistent_kernel(fn)
        ks = [s for s in sites if s.kernel == name]
        if new is None or not ks:
            continue
        ok = True
        for s in ks:
            grid = s.grid
            if isinstance(grid, cst.Name):
                vals = local_assignment(owner[id(s.call)], grid.value)
                users = [x for x in sites if isinstance(x.grid, cst.Name) and x.grid.value == grid.value
                         and owner[id(x.call)] is owner[id(s.call)]]
                if len(vals) != 1 or len(users) != 1:
                    ok = False
                    break
                grid = vals[0]
            if not isinstance(grid, cst.Tuple) or len(grid.elements) != 1:
                ok = False
                break
            tensor = next((s.bound[p] for p in param_names(fn) if p.endswith("_ptr") and p in s.bound
                           and isinstance(s.bound[p], cst.Name)), None)
            if tensor is None:
                ok = False
                break
            edits[id(s.call)] = (grid.elements[0].value, tensor, per_sm[name], name)
        if ok:
            new_fns[name] = new
            done.append(name)
        else:
            for s in ks:
                edits.pop(id(s.call), None)
    if not done:
        return source, []
    taken = set().union(*(names_in(f) for f in launchers))
    tiles, progs = "_tiles", "_progs"
    while tiles in taken or progs in taken:
        tiles, progs = "_" + tiles, "_" + progs

    class T(cst.CSTTransformer):
        """The statement holding a rewritten launch gets the tile/program counts computed right before it."""

        def leave_SimpleStatementLine(self, original, updated):
            inside = [c for cs in _calls_in(original) for c in cs if id(c) in edits]
            if not inside:
                return updated
            call = inside[0]
            g0, tensor, k, kname = edits[id(call)]

            class C(cst.CSTTransformer):
                def leave_Call(self, o, u):
                    if o is call:
                        u2 = u.with_changes(func=u.func.with_changes(
                            slice=[cst.SubscriptElement(cst.Index(expr(f"({progs},)")))]))
                        return add_call_kwargs(u2, {"NUM_TILES": cst.Name(tiles), "NUM_PROGS": cst.Name(progs)})
                    return u

            pre = stmts(f"{tiles} = {code_of(g0)}\n"
                        f"{progs} = min({tiles}, {count(code_of(tensor), kname, k)})\n")
            return cst.FlattenSentinel(pre + [original.visit(C())])

    has_helper = helper_fn.name.value in {x.name.value for x in module.body if isinstance(x, cst.FunctionDef)}
    body = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in new_fns:
            body.append(new_fns[s.name.value])
            continue
        if s is launch and not has_helper:
            body.append(helper_fn.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
        body.append(s.visit(T()) if any(s is f or _contains(s, f) for f in launchers) else s)
    return module.with_changes(body=body).code, done


def _contains(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    found = [False]

    class V(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            if n is inner:
                found[0] = True
            return not found[0]

    node.visit(V())
    return found[0]


@rewrite("persistent", "persistent programs: SMs x k programs loop over the tiles of a 1-D grid", priority=35)
def persistent(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("persistent")
    if not motivating:
        return []
    module = parse(ctx.spec.source)
    kernels = jit_functions(module)
    heavy = {n for n, fn in kernels.items() if calls_named(fn, "tl.dot")}
    out = grouped_gemm_proposals(ctx, [f.id for f in motivating])
    seen = {ctx.spec.source}
    for light_k, heavy_k in ((4, 1), (8, 2)):
        per_sm = {n: (heavy_k if n in heavy else light_k) for n in kernels}
        src, done = persistent_source(ctx.spec.source, per_sm)
        if not done or src in seen:
            continue
        seen.add(src)
        desc = ", ".join(f"{n}: {per_sm[n]} program(s) per SM" for n in done)
        out.append(Proposal("persistent", src, {"per_sm": {n: per_sm[n] for n in done}}, f"persistent {desc}",
                            [f.id for f in motivating],
                            "no tail wave and no per-program launch cost: the last tiles are spread over all SMs; "
                            "worth a few percent where the grid is a few waves or the kernel is launch-bound, "
                            "nothing where the grid is many waves of short programs"))
    return out
