"""2-D tiles for kernels that walk a 2-D array with one index per program and a 1-D block along the other dim.

A naive transpose (``row = tl.program_id(0); cols = tl.arange(0, BLOCK); v = tl.load(x + row * N + cols);
tl.store(out + cols * M + row, v)``) reads along the contiguous dim of its input and writes one element per
lane a stride apart. Made into tiles, each program takes ``TDX_BLOCK_R`` consecutive values of its program
index (``row`` becomes ``rows[:, None]``) and a ``TDX_BLOCK_C`` chunk of the block (``tl.arange(0, BLOCK)``
becomes ``pid_c * TDX_BLOCK_C + tl.arange(0, TDX_BLOCK_C)`` over a new grid axis of ``BLOCK // TDX_BLOCK_C``
programs), so every access is a ``TDX_BLOCK_R x TDX_BLOCK_C`` tile; Triton's coalescing pass then gives each
load and store the layout of its own contiguous dim (the input's columns, the output's rows) and converts
between them through shared memory.

The element set is unchanged: the chunks partition ``[0, BLOCK)`` exactly (power-of-two chunk, at most
BLOCK), and the row index is masked with ``rows < TDX_ROWS`` (the original grid size on that axis). It applies
only where this is sound: a straight-line kernel (no loops or branches), elementwise (no reductions, dots,
scans, reshapes, atomics), 1-D (no ``[:, None]`` already), one block constexpr, every store indexed by the
tiled program index (no two programs write one place), and launch sites whose grid is a tuple (or a grid
lambda) with pure host expressions.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.alignment import _pure_host_expr
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    dependent_names,
    add_call_kwargs,
    add_params,
    calls_named,
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    local_assignment,
    names_in,
    paren,
    parse,
    replace_nodes,
    stmt,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites

#: calls whose result shape or semantics depend on the block shape, or that combine lanes
NOT_ELEMENTWISE = ("tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.cumsum", "tl.cumprod", "tl.argmax", "tl.argmin",
                   "tl.dot", "tl.associative_scan", "tl.reshape", "tl.view", "tl.trans", "tl.permute",
                   "tl.broadcast_to", "tl.expand_dims", "tl.join", "tl.split", "tl.interleave", "tl.sort",
                   "tl.histogram", "tl.xor_sum", "tl.make_block_ptr", "tl.advance", "tl.static_print",
                   "tl.device_print", "tl.static_assert", "tl.device_assert")
ROWS, ROWS_OK, ROWS_N, BLOCK_R, BLOCK_C = "_tdx_rows", "_tdx_rows_ok", "TDX_ROWS", "TDX_BLOCK_R", "TDX_BLOCK_C"
#: (rows per program, block chunk) proposals: 64x64 and 32x128 tiles (32 rows: a full sector per column)
TILES = ((64, 64), (32, 128))


#: host functions that are pure in their arguments
PURE_CALLS = ("triton.next_power_of_2", "triton.cdiv", "min", "max", "int", "abs")


def _pure(e: cst.BaseExpression) -> bool:
    """Safe to evaluate again at the launch site."""
    if isinstance(e, cst.Call) and dotted(e.func) in PURE_CALLS:
        return all(a.keyword is None and not a.star and _pure(a.value) for a in e.args)
    if isinstance(e, cst.BinaryOperation):
        return _pure(e.left) and _pure(e.right)
    return _pure_host_expr(e)


def _axis(call: cst.Call) -> int | None:
    if not call.args:
        return 0
    v = code_of(call.args[0].value)
    return int(v) if v.isdigit() else None


def _pid_names(fn: cst.FunctionDef, axis: int) -> set[str]:
    """Names whose value depends on ``tl.program_id(axis)`` (transitively through assignments)."""
    return dependent_names(fn, lambda v: any(_axis(c) == axis for c in calls_named(v, "tl.program_id")))


def _depends(e: cst.CSTNode, axis: int, names: set[str]) -> bool:
    return bool(names_in(e) & names) or any(_axis(c) == axis for c in calls_named(e, "tl.program_id"))


def _ptr(call: cst.Call) -> cst.BaseExpression | None:
    a = next((x.value for x in call.args if x.keyword and x.keyword.value == "pointer"), None)
    return a if a is not None else next((x.value for x in call.args if x.keyword is None), None)


def kernel_plan(fn: cst.FunctionDef) -> tuple[str, list[int], int | None] | None:
    """(block constexpr, row axes that can be tiled, free axis for the block chunks) or None."""
    if any(m for m in (_find(fn, cst.For), _find(fn, cst.While), _find(fn, cst.If), _find(fn, cst.IfExp))):
        return None
    if any(calls_named(fn, c) for c in NOT_ELEMENTWISE) or any(
            dotted(c.func).startswith("tl.atomic") for c in _all_calls(fn)):
        return None
    if any("None" in code_of(s) for s in _find(fn, cst.SubscriptElement)):
        return None
    if any(p.default is not None for p in fn.params.params):
        return None
    aranges = calls_named(fn, "tl.arange")
    consts = set(constexpr_names(fn))
    blocks = {code_of(a.args[1].value) for a in aranges if len(a.args) == 2 and code_of(a.args[0].value) == "0"}
    if len(blocks) != 1 or len(aranges) != sum(len(a.args) == 2 for a in aranges) or \
            any(code_of(a.args[0].value) != "0" for a in aranges):
        return None
    block = next(iter(blocks))
    if block not in consts or ROWS_N in consts or BLOCK_R in consts:
        return None
    # the block constexpr only sizes the aranges and scales program offsets (pid * BLOCK)
    uses = [n for n in _find(fn, cst.Name) if n.value == block]
    allowed = sum(1 for a in aranges) + sum(
        1 for b in _find(fn, cst.BinaryOperation) if isinstance(b.operator, cst.Multiply)
        and block in (code_of(b.left), code_of(b.right)))
    if len(uses) - 1 > allowed:   # -1: the parameter itself
        return None
    if any(_axis(c) is None for c in calls_named(fn, "tl.program_id") + calls_named(fn, "tl.num_programs")):
        return None
    axes = sorted({_axis(c) for c in calls_named(fn, "tl.program_id")})
    block_axes = set()
    for ax in axes:
        names = _pid_names(fn, ax)
        for b in _find(fn, cst.BinaryOperation):
            if isinstance(b.operator, cst.Multiply) and block in (code_of(b.left), code_of(b.right)) and \
                    _depends(b, ax, names):
                block_axes.add(ax)
    stores = calls_named(fn, "tl.store")
    rows = [ax for ax in axes if ax not in block_axes and stores and
            all(_ptr(s) is not None and _depends(_ptr(s), ax, _pid_names(fn, ax)) for s in stores)]
    free = next((ax for ax in (0, 1, 2) if ax not in axes), None)
    return (block, rows, free) if rows else None


def _find(node: cst.CSTNode, kind) -> list:
    found = []

    class V(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return True

    node.visit(V())
    return found


def _all_calls(node: cst.CSTNode) -> list[cst.Call]:
    return _find(node, cst.Call)


def _with_row_mask(call: cst.Call, mask_pos: int, ok: str = ROWS_OK) -> cst.Call:
    """A load's or store's mask (at ``mask_pos`` when positional) and ``ok``, or ``mask=ok`` where it has none."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword and a.keyword.value == "mask":
            args[i] = a.with_changes(value=expr(f"{code_of(paren(a.value))} & {ok}"))
            return call.with_changes(args=args)
    positional = [i for i, a in enumerate(args) if a.keyword is None]
    if len(positional) > mask_pos:
        i = positional[mask_pos]
        args[i] = args[i].with_changes(value=expr(f"{code_of(paren(args[i].value))} & {ok}"))
        return call.with_changes(args=args)
    return add_call_kwargs(call, {"mask": expr(ok)})


def tile_kernel(fn: cst.FunctionDef, block: str, row_axis: int, chunk_axis: int | None) -> cst.FunctionDef:
    repl: dict[int, cst.CSTNode] = {}
    for c in calls_named(fn, "tl.program_id"):
        if _axis(c) == row_axis:
            repl[id(c)] = cst.Name(ROWS)
    for c in calls_named(fn, "tl.num_programs"):
        if _axis(c) == row_axis:
            repl[id(c)] = cst.Name(ROWS_N)
    if chunk_axis is not None:
        for c in calls_named(fn, "tl.arange"):
            repl[id(c)] = expr(f"(tl.program_id({chunk_axis}) * {BLOCK_C} + tl.arange(0, {BLOCK_C}))")
    memory = {id(c): 1 for c in calls_named(fn, "tl.load")} | {id(c): 2 for c in calls_named(fn, "tl.store")}

    class T(cst.CSTTransformer):   # innermost first: a load inside a store keeps its own rewrite
        def on_leave(self, original, updated):
            if id(original) in memory:   # mask position: 1 for tl.load(ptr, mask), 2 for tl.store(ptr, v, mask)
                return _with_row_mask(updated, memory[id(original)])
            return repl.get(id(original), updated)

    new = fn.visit(T())
    body = list(new.body.body)
    head = []
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        head, body = [body[0]], body[1:]
    pre = [stmt(f"{ROWS} = (tl.program_id({row_axis}) * {BLOCK_R} + tl.arange(0, {BLOCK_R}))[:, None]"
                f"  # {BLOCK_R} values of the program index per program (2-D tiles)"),
           stmt(f"{ROWS_OK} = {ROWS} < {ROWS_N}")]
    new = new.with_changes(body=new.body.with_changes(body=head + pre + body))
    new = add_params(new, [ROWS_N])
    return add_params(new, [BLOCK_R] + ([BLOCK_C] if chunk_axis is not None else []), constexpr=True)


def _grid_tuple(host: cst.FunctionDef, grid: cst.BaseExpression):
    """(elements, rebuild) of a launch grid: a tuple, a name bound once to a tuple, or a lambda returning one."""
    if isinstance(grid, cst.Name):
        vals = local_assignment(host, grid.value)
        if len(vals) != 1:
            return None
        grid = vals[0]
    if isinstance(grid, cst.Tuple):
        return [e.value for e in grid.elements], lambda els: expr(f"({', '.join(code_of(e) for e in els)},)")
    if isinstance(grid, cst.Lambda) and isinstance(grid.body, cst.Tuple):
        params = {p.name.value for p in grid.params.params}
        elems = [e.value for e in grid.body.elements]
        return elems, lambda els: grid.with_changes(body=expr(f"({', '.join(code_of(e) for e in els)},)")), params
    return None


def tile_source(source: str, kernel: str, rows_per_program: int, chunk: int) -> tuple[str, str] | None:
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None or any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                         .endswith(("autotune", "heuristics")) for d in fn.decorators):
        return None
    plan = kernel_plan(fn)
    if plan is None:
        return None
    block, rows, free = plan
    row_axis = rows[0]
    sites = [(h, s) for h, s in host_launch_sites(module) if s.kernel == kernel]
    if not sites:
        return None
    call_repl: dict[int, cst.Call] = {}
    for host, site in sites:
        b = site.bound.get(block)
        g = _grid_tuple(host, site.grid) if site.grid is not None else None
        if b is None or g is None or not _pure(b):
            return None
        elems, rebuild = g[0], g[1]
        meta = g[2] if len(g) > 2 else set()
        els = list(elems)
        if row_axis >= len(els) or not _pure(els[row_axis]) or names_in(els[row_axis]) & meta:
            return None
        rows_n = els[row_axis]
        chunk_e = expr(f"min({chunk}, {code_of(b)})")
        els[row_axis] = expr(f"triton.cdiv({code_of(rows_n)}, {rows_per_program})")
        if free is not None:
            while len(els) <= free:
                els.append(cst.Integer("1"))
            els[free] = expr(f"triton.cdiv({code_of(b)}, {code_of(chunk_e)})")
        kw = {ROWS_N: rows_n, BLOCK_R: cst.Integer(str(rows_per_program))}
        if free is not None:
            kw[BLOCK_C] = chunk_e
        new_call = add_call_kwargs(site.call, kw)
        sl = new_call.func.slice
        new_call = new_call.with_changes(func=new_call.func.with_changes(
            slice=[sl[0].with_changes(slice=cst.Index(value=rebuild(els)))]))
        call_repl[id(site.call)] = new_call
    new_fn = tile_kernel(fn, block, row_axis, free)
    out = replace_nodes(module, {id(fn): new_fn, **call_repl})
    what = (f"{kernel}: program axis {row_axis} tiled by {rows_per_program} rows"
            + (f", {block} split into chunks of {chunk} on axis {free}" if free is not None else ""))
    return out.code, what


@rewrite("tile_2d", "a 2-D array walked with one index per program and a 1-D block -> "
                    "TDX_BLOCK_R x TDX_BLOCK_C tiles (coalesced loads and stores, layout converted in shared memory)",
         priority=8)
def tile_2d(ctx: RewriteContext) -> list[Proposal]:
    return ctx.per_kernel("tile_2d", ctx.motivating("tile_2d"), TILES, tile_source,
                          lambda k, r, c: {"kernel": k, "rows": r, "chunk": c},
                          "each warp reads and writes whole 32-byte sectors along each access's contiguous dim "
                          "(the strided access becomes a column of a tile); bandwidth-bound kernels approach "
                          "the copy bandwidth")
