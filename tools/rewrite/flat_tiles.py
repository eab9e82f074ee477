"""2-D tiles for a kernel that walks a 2-D array through a flat index split by ``//`` and ``%`` (a naive transpose).

A kernel written with 1-D programs over the flat element index,

    offs = pid * BLOCK + tl.arange(0, BLOCK)
    r = offs // N
    c = offs % N
    v = tl.load(x_ptr + offs, mask=offs < M * N)          # along the rows of x: coalesced
    tl.store(out_ptr + c * M + r, v, mask=offs < M * N)     # a column of out per warp: a stride of M apart

hides the 2-D structure from the compiler: the store's address goes through ``//`` and ``%``, so neither side can
be given the layout of its own contiguous dimension. Made into tiles, a program takes ``TDX_BLOCK_R`` rows and
``TDX_BLOCK_C`` columns over a 2-D grid: ``r`` and ``c`` become the tile's row column and column row
(``[:, None]`` / ``[None, :]``), ``offs = r * N + c``; every access keeps its original mask and gets
``c < N`` (a tile's columns past the row's end would alias the next row) and ``offs < TDX_TOTAL`` (the elements
the original grid covered). Triton's coalescing pass then gives the load and the store each its own layout and
converts between them through shared memory.

Preconditions (tile_2d's for the rest): one ``tl.arange`` and one program axis, used only in ``offs``; the
flat index split only as ``offs // N`` and ``offs % N`` with one divisor; no loops, branches, reductions, dots,
reshapes or atomics; no ``[:, None]`` yet; a launch grid of one element.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
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
    stmt,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.rows_per_program import append_params
from tritondx.tools.rewrite.tile_2d import NOT_ELEMENTWISE, _find, _grid_tuple, _pure

R, C, OK, TOTAL, BLOCK_R, BLOCK_C = "_tdx_r", "_tdx_c", "_tdx_in", "TDX_TOTAL", "TDX_BLOCK_R", "TDX_BLOCK_C"
#: (rows, columns) of the proposed tiles
TILES = ((64, 64), (32, 128))
ANSWERS = ("flat_index_2d", "uncoalesced_access")


def _single_assign(fn: cst.FunctionDef) -> dict[str, tuple[cst.SimpleStatementLine, cst.BaseExpression]]:
    out: dict[str, tuple] = {}
    counts: dict[str, int] = {}
    for st in fn.body.body:
        if isinstance(st, cst.SimpleStatementLine):
            for s in st.body:
                if isinstance(s, cst.Assign):
                    for t in s.targets:
                        for n in names_in(t.target):
                            counts[n] = counts.get(n, 0) + 1
                    if len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name) and len(st.body) == 1:
                        out[s.targets[0].target.value] = (st, s.value)
                elif isinstance(s, cst.AugAssign):
                    for n in names_in(s.target):
                        counts[n] = counts.get(n, 2) + 2
    return {n: v for n, v in out.items() if counts.get(n) == 1}


def kernel_plan(fn: cst.FunctionDef) -> dict | None:
    """The names of the flat index, its row and column parts, the divisor and the block constexpr; or None."""
    if any(_find(fn, k) for k in (cst.For, cst.While, cst.If, cst.IfExp)):
        return None
    if any(calls_named(fn, c) for c in NOT_ELEMENTWISE) or any(
            dotted(c.func).startswith("tl.atomic") for c in _find(fn, cst.Call)):
        return None
    if any("None" in code_of(s) for s in _find(fn, cst.SubscriptElement)):
        return None
    if {R, C, OK} & names_in(fn) or {TOTAL, BLOCK_R, BLOCK_C} & set(param_names(fn)):
        return None
    aranges = calls_named(fn, "tl.arange")
    pids = calls_named(fn, "tl.program_id")
    if len(aranges) != 1 or calls_named(fn, "tl.num_programs") or not pids:
        return None
    if any(code_of(p.args[0].value) != "0" if p.args else False for p in pids):
        return None
    ar = aranges[0]
    if len(ar.args) != 2 or code_of(ar.args[0].value) != "0" or not isinstance(ar.args[1].value, cst.Name) \
            or ar.args[1].value.value not in constexpr_names(fn):
        return None
    block = ar.args[1].value.value
    single = _single_assign(fn)
    # offs = pid * BLOCK + tl.arange(0, BLOCK) (pid a name of tl.program_id(0) or the call itself)
    pid_names = {n for n, (_, v) in single.items() if isinstance(v, cst.Call) and dotted(v.func) == "tl.program_id"}

    def is_pid(e: cst.BaseExpression) -> bool:
        return (isinstance(e, cst.Name) and e.value in pid_names) or \
            (isinstance(e, cst.Call) and dotted(e.func) == "tl.program_id")

    offs = None
    for n, (_, v) in single.items():
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add) and (v.left is ar or v.right is ar):
            other = v.right if v.left is ar else v.left
            if isinstance(other, cst.BinaryOperation) and isinstance(other.operator, cst.Multiply) and (
                    (is_pid(other.left) and code_of(other.right) == block) or
                    (is_pid(other.right) and code_of(other.left) == block)):
                offs = n
    if offs is None:
        return None
    # r = offs // D, c = offs % D, one divisor; offs split nowhere else
    row = col = div = None
    for b in _find(fn, cst.BinaryOperation):
        if isinstance(b.operator, (cst.FloorDivide, cst.Modulo)) and offs in names_in(b):
            if not (isinstance(b.left, cst.Name) and b.left.value == offs):
                return None
            d = code_of(b.right)
            if div is not None and d != div:
                return None
            div = d
            owner = next((n for n, (_, v) in single.items() if v is b), None)
            if owner is None:
                return None
            if isinstance(b.operator, cst.FloorDivide):
                row = owner
            else:
                col = owner
    if row is None or col is None:
        return None
    divisor = next(b.right for b in _find(fn, cst.BinaryOperation) if isinstance(b.operator, cst.Modulo)
                   and names_in(b) & {offs})
    if not names_in(divisor) <= set(param_names(fn)) or _find(divisor, cst.Call):
        return None
    # the program id and the arange are used only to build offs
    offs_stmt = single[offs][0]
    pid_stmts = {id(single[n][0]) for n in pid_names}
    for st in fn.body.body:
        if st is offs_stmt or id(st) in pid_stmts:
            continue
        if names_in(st) & (pid_names | {block}) - {block} or calls_named(st, "tl.program_id"):
            return None
    return {"offs": offs, "row": row, "col": col, "div": divisor, "block": block, "pids": pid_names}


def _inside(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    found = [False]

    class V(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            if n is inner:
                found[0] = True
            return not found[0]

    node.visit(V())
    return found[0]


def _with_mask(call: cst.Call, pos: int) -> cst.Call:
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword and a.keyword.value == "mask":
            args[i] = a.with_changes(value=expr(f"({code_of(a.value)}) & {OK}"))
            return call.with_changes(args=args)
    positional = [i for i, a in enumerate(args) if a.keyword is None]
    if len(positional) > pos:
        i = positional[pos]
        args[i] = args[i].with_changes(value=expr(f"({code_of(args[i].value)}) & {OK}"))
        return call.with_changes(args=args)
    return add_call_kwargs(call, {"mask": cst.Name(OK)})


def tile_kernel(fn: cst.FunctionDef, plan: dict) -> cst.FunctionDef:
    single = _single_assign(fn)
    div = code_of(plan["div"])
    new_stmt = {
        id(single[plan["offs"]][0]): [
            stmt(f"{R} = (tl.program_id(0) * {BLOCK_R} + tl.arange(0, {BLOCK_R}))[:, None]"
                 f"  # {BLOCK_R} x {BLOCK_C} tiles of the 2-D array (was a flat index)"),
            stmt(f"{C} = (tl.program_id(1) * {BLOCK_C} + tl.arange(0, {BLOCK_C}))[None, :]"),
            stmt(f"{plan['offs']} = {R} * ({div}) + {C}"),
            stmt(f"{OK} = ({C} < ({div})) & ({plan['offs']} < {TOTAL})"),
        ],
        id(single[plan["row"]][0]): [stmt(f"{plan['row']} = {R}")],
        id(single[plan["col"]][0]): [stmt(f"{plan['col']} = {C}")],
    }
    drop = {id(single[n][0]) for n in plan["pids"] if n in single}
    memory = {id(c): 1 for c in calls_named(fn, "tl.load")} | {id(c): 2 for c in calls_named(fn, "tl.store")}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            if id(original) in memory:
                return _with_mask(updated, memory[id(original)])
            return updated

    body = []
    for st in fn.body.body:
        if id(st) in drop:
            continue
        if id(st) in new_stmt:
            body.extend(new_stmt[id(st)])
        else:
            body.append(st.visit(T()))
    new = fn.with_changes(body=fn.body.with_changes(body=body))
    new = append_params(new, [TOTAL])
    return append_params(new, [BLOCK_R, BLOCK_C], constexpr=True)


def tiles_source(source: str, kernel: str, rows: int, cols: int) -> tuple[str, str] | None:
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None or any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                         .endswith(("autotune", "heuristics")) for d in fn.decorators):
        return None
    plan = kernel_plan(fn)
    if plan is None:
        return None
    sites = [(h, s) for h, s in host_launch_sites(module) if s.kernel == kernel]
    if not sites:
        return None
    call_repl: dict[int, cst.Call] = {}
    for host, site in sites:
        g = _grid_tuple(host, site.grid) if site.grid is not None else None
        b = site.bound.get(plan["block"])
        if g is None or b is None or len(g[0]) != 1 or not _pure(b) or not _pure(g[0][0]) or \
                (len(g) > 2 and names_in(g[0][0]) & g[2]):
            return None
        used = names_in(plan["div"])
        if any(p not in site.bound or not _pure(site.bound[p]) for p in used):
            return None
        from tritondx.tools.rewrite.cst_util import subst
        div_host = code_of(subst(plan["div"], {p: expr(f"({code_of(site.bound[p])})") for p in used}))
        total = f"({code_of(g[0][0])}) * ({code_of(b)})"
        els = [expr(f"triton.cdiv(triton.cdiv({total}, {div_host}), {rows})"),
               expr(f"triton.cdiv({div_host}, {cols})")]
        new_call = add_call_kwargs(site.call, {TOTAL: expr(total), BLOCK_R: cst.Integer(str(rows)),
                                               BLOCK_C: cst.Integer(str(cols))})
        sl = new_call.func.slice
        new_call = new_call.with_changes(func=new_call.func.with_changes(
            slice=[sl[0].with_changes(slice=cst.Index(value=g[1](els)))]))
        call_repl[id(site.call)] = new_call
    out = replace_nodes(module, {id(fn): tile_kernel(fn, plan), **call_repl})
    return out.code, (f"{kernel}: flat index split by // and % {code_of(plan['div'])} -> {rows} x {cols} tiles on a "
                      "2-D grid")


@rewrite("flat_tiles", "a 2-D array walked through a flat index split by // and % (a naive transpose) -> "
                       "TDX_BLOCK_R x TDX_BLOCK_C tiles on a 2-D grid", priority=8, also=("tile_2d",))
def flat_tiles(ctx: RewriteContext) -> list[Proposal]:
    return ctx.per_kernel("flat_tiles", ctx.motivating("flat_tiles", ANSWERS), TILES, tiles_source,
                          lambda k, r, c: {"kernel": k, "rows": r, "cols": c},
                          "both the read and the write move whole 32-byte sectors along their own contiguous "
                          "dimension (the strided side becomes a tile's column, converted in shared memory); "
                          "a bandwidth-bound transpose approaches the copy bandwidth")
