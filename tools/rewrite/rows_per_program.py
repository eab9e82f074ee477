"""Items per program: a grid of tiny programs (one row, token or head each, 16-256 bytes) -> several per program.

A kernel launched with one program per row whose block covers only that row's few elements spends its time
launching and scheduling programs: each moves a few dozen bytes. Here each program takes ``TDX_BLOCK_R``
consecutive values of its row index instead of one, as a 2-D block:

- ``tl.program_id(a)`` becomes ``_tdx_rows = (tl.program_id(a) * TDX_BLOCK_R + tl.arange(0, TDX_BLOCK_R))[:, None]``
  (a column of row indices; ``tl.num_programs(a)`` the row count ``TDX_ROWS``);
- ``tl.arange(0, B)`` becomes ``tl.arange(0, B)[None, :]`` (a row of the block);
- a reduction over the row block (``tl.sum(x, axis=0)``, ``tl.max(x)`` ...) becomes ``tl.sum(x, axis=1,
  keep_dims=True)``: one value per row, a column that broadcasts against the rows as the scalar did;
- ``tl.zeros([B], ...)`` / ``tl.full([B], ...)`` become ``[TDX_BLOCK_R, B]``;
- every load and store whose address depends on the row gets ``& (_tdx_rows < TDX_ROWS)`` in its mask.

The launch grid's element on that axis becomes ``cdiv(rows, TDX_BLOCK_R)``, with ``TDX_BLOCK_R`` chosen at the
launch so that a program holds about ``ELEMS`` elements (a power of two, at most ``MAX_ROWS``).

Sound where every row's work stays its own: a 1-D kernel (no ``[:, None]`` yet), no dot, reshape, scan, sort,
atomic or call of another jit function, every store addressed by the row, no ``if``/``while`` on anything but
parameters, no loop whose bounds depend on the row, and no value started as a Python scalar and updated later
(a scalar accumulator would change type inside a loop), no parameter advanced inside a loop (at the top level,
``X += row * stride`` is fine: it becomes a column of pointers). The verifier decides the rest.

A kernel whose block is already 2-D or more (``offs_g[:, None] ... offs_d[None, :]``) takes the N-D path,
``rows_nd``: the rows become a leading axis of the values that depend on the row.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite import rows_nd
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
    names_in,
    param_names,
    parse,
    replace_nodes,
    statement_lines,
    stmt,
    with_prelude,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.row_resident import row_resident_source
from tritondx.tools.rewrite.tile_2d import _axis, _depends, _find, _grid_tuple, _pid_names, _ptr, _pure, _with_row_mask

ROWS, ROWS_OK, ROWS_N, BLOCK_R = "_tdx_rows", "_tdx_rows_ok", "TDX_ROWS", "TDX_BLOCK_R"
#: the launcher's local that holds the rows per program (the grid and the kernel's ``TDX_BLOCK_R`` read it)
BLOCK_LOCAL = "_tdx_block_r"
#: (elements a program holds, most rows per program) of the proposals
SIZES = ((2048, 64), (8192, 128))
#: the longest row (elements) a multi-pass kernel holds as one block before rows are taken together (``one_pass_rows``;
#: ``row_resident``'s larger size)
ROW_RESIDENT_MAX = 16384
#: programs a candidate keeps per SM at least, where the launch's program count is known (a launch record at the
#: benchmark size): rows taken into one program leave the rest of the device idle below it
MIN_PROGRAMS_PER_SM = 2


def row_cap(programs: int, sm_count: int = 132) -> int:
    """The most rows per program that keep ``MIN_PROGRAMS_PER_SM`` programs per SM out of ``programs`` (a power of
    two, at least 1): lightllm's flash-decoding reduction runs 2048 programs, so 4 rows, not 16 (128 programs)."""
    r = max(1, programs // (MIN_PROGRAMS_PER_SM * sm_count))
    return 1 << (r.bit_length() - 1)


#: detectors whose findings this family answers (besides findings that suggest it by name)
ANSWERS = ("tiny_programs", "tiny_programs_launch")
REDUCTIONS = ("tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin", "tl.xor_sum")
FORBIDDEN = ("tl.dot", "tl.reshape", "tl.view", "tl.trans", "tl.permute", "tl.broadcast_to", "tl.expand_dims",
             "tl.join", "tl.split", "tl.interleave", "tl.sort", "tl.histogram", "tl.cumsum", "tl.cumprod",
             "tl.associative_scan", "tl.reduce", "tl.make_block_ptr", "tl.advance", "tl.make_tensor_descriptor",
             "tl.flip", "tl.gather", "tl.static_assert", "tl.device_assert", "tl.static_print", "tl.device_print")
#: tensor methods that reshape or reduce (the kernel is left alone when it calls one)
SHAPE_METHODS = ("reshape", "view", "trans", "permute", "sum", "max", "min", "broadcast_to", "expand_dims", "T")


def _axis_of(call: cst.Call) -> int | None:
    """The reduction axis of ``tl.sum(x, axis=0)`` / ``tl.sum(x, 0)``: 0 or None (all of a 1-D block); -1 other."""
    a = next((x.value for x in call.args if x.keyword and x.keyword.value == "axis"), None)
    if a is None:
        pos = [x for x in call.args if x.keyword is None]
        a = pos[1].value if len(pos) > 1 else None
    if a is None:
        return None
    v = code_of(a)
    return 0 if v in ("0", "-1", "None") else -1


def _refused(fn: cst.FunctionDef) -> bool:
    """What neither path takes: an autotuned or heuristics kernel, a call ``FORBIDDEN`` names or an atomic, a
    parameter named like the rewrite's own."""
    if any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
           .endswith(("autotune", "heuristics")) for d in fn.decorators):
        return True
    names = {dotted(c.func) for c in _find(fn, cst.Call)}
    return bool(names & set(FORBIDDEN) or any(n.startswith("tl.atomic") for n in names)
                or {ROWS_N, BLOCK_R} & set(param_names(fn)))


def kernel_axis(fn: cst.FunctionDef) -> int | None:
    """The program axis whose index addresses every store, when the kernel can take several rows per program."""
    if _refused(fn) or any("None" in code_of(s) for s in _find(fn, cst.SubscriptElement)):
        return None
    calls = _find(fn, cst.Call)
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in SHAPE_METHODS
           and not dotted(c.func).startswith(("tl.", "triton.")) for c in calls):
        return None
    consts, params = set(constexpr_names(fn)), set(param_names(fn))
    # helpers and other jit functions: their parameters' shapes would change
    if any(isinstance(c.func, cst.Name) and c.func.value not in ("range", "float", "int", "min", "max", "len")
           for c in calls):
        return None
    for c in calls_named(fn, "tl.arange"):
        args = [a.value for a in c.args]
        if len(args) != 2 or code_of(args[0]) != "0" or not (isinstance(args[1], cst.Integer) or (
                isinstance(args[1], cst.Name) and args[1].value in consts)):
            return None
    for c in calls_named(fn, "tl.zeros") + calls_named(fn, "tl.full"):
        shape = c.args[0].value if c.args else None
        if not isinstance(shape, (cst.List, cst.Tuple)) or len(shape.elements) != 1:
            return None
    for r in REDUCTIONS:
        if any(_axis_of(c) == -1 for c in calls_named(fn, r)):
            return None
    pids = calls_named(fn, "tl.program_id") + calls_named(fn, "tl.num_programs")
    if not pids or any(_axis(c) is None for c in pids):
        return None
    # a Python scalar that is updated later would become a column of the block: its type changes in a loop
    # (a parameter advanced at the top level, ``X += row * stride``, just becomes a column of pointers; inside a
    # loop it would be carried from one iteration to the next with a changed shape)
    assigned: dict[str, int] = {}
    scalar_init: set[str] = set()
    in_loop: set[str] = set()

    class V(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0

        def visit_For(self, n) -> None:
            self.depth += 1

        def leave_For(self, n) -> None:
            self.depth -= 1

        def visit_While(self, n) -> None:
            self.depth += 1

        def leave_While(self, n) -> None:
            self.depth -= 1

        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                for nm in names_in(t.target):
                    assigned[nm] = assigned.get(nm, 0) + 1
                    if self.depth:
                        in_loop.add(nm)
            if _is_number(n.value):
                scalar_init.update(names_in(n.targets[0].target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            for nm in names_in(n.target):
                assigned[nm] = assigned.get(nm, 0) + 2
                if self.depth:
                    in_loop.add(nm)

    fn.visit(V())
    if any(assigned.get(n, 0) > 1 for n in scalar_init) or in_loop & params:
        return None
    for ax in sorted({_axis(c) for c in calls_named(fn, "tl.program_id")}):
        derived = _pid_names(fn, ax) | _loaded_names(fn)
        ok = True
        for node in _find(fn, cst.If) + _find(fn, cst.While) + _find(fn, cst.IfExp):
            if not names_in(node.test) <= consts | params:
                ok = False
        for lp in _find(fn, cst.For):
            if _depends(lp.iter, ax, derived):
                ok = False
        stores = calls_named(fn, "tl.store")
        if ok and stores and all(_ptr(s) is not None and _depends(_ptr(s), ax, _pid_names(fn, ax)) for s in stores):
            return ax
    return None


def nd_axis(fn: cst.FunctionDef) -> tuple[int | None, "rows_nd.Ranks | None"]:
    """The program axis (and the ranks) for the N-D path: nothing ``_refused`` names, every ``tl.arange`` bounded
    by numbers and constexprs (``HEAD_DIM // 2``, no call), and ``rows_nd.plan`` holds for the axis."""
    if _refused(fn):
        return None, None
    consts = set(constexpr_names(fn))
    for c in calls_named(fn, "tl.arange"):   # bounds of numbers and constexprs (``HEAD_DIM // 2``)
        args = [a.value for a in c.args]
        if len(args) != 2 or any(not names_in(a) <= consts for a in args) or \
                any(_find(a, cst.Call) for a in args):
            return None, None
    for ax in sorted({a for a in (_axis(c) for c in calls_named(fn, "tl.program_id")) if a is not None}):
        ranks = rows_nd.plan(fn, ax)
        if ranks is not None:
            return ax, ranks
    return None, None


def _is_number(e: cst.BaseExpression) -> bool:
    if isinstance(e, (cst.Integer, cst.Float)):
        return True
    if isinstance(e, cst.UnaryOperation):
        return _is_number(e.expression)
    return isinstance(e, cst.Call) and dotted(e.func) in ("float", "int")


def _loaded_names(fn: cst.FunctionDef) -> set[str]:
    """Names whose value comes from a load (transitively): data-dependent."""
    return dependent_names(fn, lambda v: bool(calls_named(v, "tl.load")))


def _reduce_rows(c: cst.Call) -> cst.Call:
    """``tl.sum(x, axis=0)`` / ``tl.max(x, 0)`` / ``tl.sum(x)`` -> ``tl.sum(x, axis=1, keep_dims=True)``."""
    eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    pos = [a for a in c.args if a.keyword is None]
    kw = [a for a in c.args if a.keyword is not None and a.keyword.value not in ("axis", "keep_dims")]
    x = pos[0] if pos else next(a for a in c.args if a.keyword is not None and a.keyword.value == "input")
    kw = [a for a in kw if a is not x]
    args = [x.with_changes(comma=cst.MaybeSentinel.DEFAULT),
            cst.Arg(keyword=cst.Name("axis"), value=cst.Integer("1"), equal=eq)] + \
        [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in pos[2:]] + \
        [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in kw] + \
        [cst.Arg(keyword=cst.Name("keep_dims"), value=cst.Name("True"), equal=eq)]
    return c.with_changes(args=args)


def rows_kernel(fn: cst.FunctionDef, axis: int) -> cst.FunctionDef:
    derived = _pid_names(fn, axis)
    kind: dict[int, str] = {}
    for c in calls_named(fn, "tl.program_id"):
        if _axis(c) == axis:
            kind[id(c)] = "rows"
    for c in calls_named(fn, "tl.num_programs"):
        if _axis(c) == axis:
            kind[id(c)] = "rows_n"
    for c in calls_named(fn, "tl.arange"):
        kind[id(c)] = "arange"
    for r in REDUCTIONS:
        for c in calls_named(fn, r):
            kind[id(c)] = "reduce"
    for c in calls_named(fn, "tl.zeros") + calls_named(fn, "tl.full"):
        kind[id(c)] = "shape"
    for c in calls_named(fn, "tl.load"):
        if _ptr(c) is not None and _depends(_ptr(c), axis, derived):
            kind[id(c)] = "load"
    for c in calls_named(fn, "tl.store"):
        kind[id(c)] = "store"

    class T(cst.CSTTransformer):   # innermost first: a call's arguments are rewritten before the call
        def on_leave(self, original, updated):
            k = kind.get(id(original))
            if k == "rows":
                return cst.Name(ROWS)
            if k == "rows_n":
                return cst.Name(ROWS_N)
            if k == "arange":
                return expr(f"{code_of(updated)}[None, :]")
            if k == "reduce":
                return _reduce_rows(updated)
            if k == "shape":
                args = list(updated.args)
                el = args[0].value.elements[0].value
                args[0] = args[0].with_changes(value=expr(f"[{BLOCK_R}, {code_of(el)}]"))
                return updated.with_changes(args=args)
            if k in ("load", "store"):   # mask position: 1 for tl.load(ptr, mask), 2 for tl.store(ptr, v, mask)
                return _with_row_mask(updated, 1 if k == "load" else 2)
            return updated

    new = with_prelude(fn.visit(T()), [
        f"{ROWS} = (tl.program_id({axis}) * {BLOCK_R} + tl.arange(0, {BLOCK_R}))[:, None]"
        f"  # {BLOCK_R} rows per program (was one)", f"{ROWS_OK} = {ROWS} < {ROWS_N}"])
    new = append_params(new, [ROWS_N])
    return append_params(new, [BLOCK_R], constexpr=True)


def append_params(fn: cst.FunctionDef, names: list[str], constexpr: bool = False) -> cst.FunctionDef:
    """``add_params`` (which gives the new parameters defaults after defaulted ones)."""
    return add_params(fn, names, constexpr)


def _block_exprs(fn: cst.FunctionDef, bound: dict[str, cst.BaseExpression]) -> list[str] | None:
    """Each ``tl.arange``'s extent as a host expression (its constexprs replaced by what the launch passes)."""
    out = []
    for c in calls_named(fn, "tl.arange"):
        start, size = c.args[0].value, c.args[1].value
        if isinstance(size, cst.Integer) and code_of(start) == "0":
            out.append(size.value)
        elif isinstance(size, cst.Name) and code_of(start) == "0":
            if size.value not in bound or not _pure(bound[size.value]):
                return None
            out.append(f"({code_of(bound[size.value])})")
        else:   # arange(HEAD_DIM // 2, HEAD_DIM): (end) - (start), the names bound at the launch
            names = names_in(start) | names_in(size)
            if any(n not in bound or not _pure(bound[n]) for n in names):
                return None
            sub = {n: f"({code_of(bound[n])})" for n in names}
            out.append("((" + _substitute(size, sub) + ") - (" + _substitute(start, sub) + "))")
    return sorted(set(out))


def _substitute(e: cst.BaseExpression, sub: dict[str, str]) -> str:
    """``e``'s code with each name in ``sub`` replaced by its text."""
    class T(cst.CSTTransformer):
        def leave_Name(self, original, updated):
            return expr(sub[updated.value]) if updated.value in sub else updated
    return code_of(e.visit(T()))


def rows_source(source: str, kernel: str, elems: int, max_rows: int) -> tuple[str, str] | None:
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None:
        return None
    axis, ranks = kernel_axis(fn), None
    if axis is None:   # a block of 2-D or more: the rows in front of its axes (``rows_nd``)
        axis, ranks = nd_axis(fn)
        if axis is None:
            return None
    sites = [(h, s) for h, s in host_launch_sites(module) if s.kernel == kernel]
    if not sites:
        return None
    call_repl: dict[int, cst.Call] = {}
    lines = statement_lines(module, {id(s.call) for _, s in sites})
    line_repl: dict[int, cst.BaseStatement] = {}
    for host, site in sites:
        g = _grid_tuple(host, site.grid) if site.grid is not None else None
        blocks = _block_exprs(fn, site.bound)
        if g is None or blocks is None:
            return None
        els = list(g[0])
        meta = g[2] if len(g) > 2 else set()
        if axis >= len(els) or not _pure(els[axis]) or names_in(els[axis]) & meta:
            return None
        rows_n = els[axis]
        if ranks is not None and ranks.widest >= 2 and len(blocks) > 1:   # a 2-D block: the product of extents
            widest = f"({' * '.join(blocks)})"
        else:
            widest = blocks[0] if len(blocks) == 1 else f"max({', '.join(blocks)})"
        r = f"max(1, min({max_rows}, {elems} // {widest}))"
        line = lines.get(id(site.call))
        if line is not None:   # one local that the grid and the kernel read: the tuner scales both together
            line_repl[id(line)] = stmt(f"{BLOCK_LOCAL} = {r}")
            r = BLOCK_LOCAL
        els[axis] = expr(f"triton.cdiv({code_of(rows_n)}, {r})")
        new_call = add_call_kwargs(site.call, {ROWS_N: rows_n, BLOCK_R: expr(r)})
        sl = new_call.func.slice
        new_call = new_call.with_changes(func=new_call.func.with_changes(
            slice=[sl[0].with_changes(slice=cst.Index(value=g[1](els)))]))
        call_repl[id(site.call)] = new_call
    kernel_new = rows_kernel(fn, axis) if ranks is None else rows_nd.rows_kernel(fn, axis, ranks)
    out = replace_nodes(module, {id(fn): kernel_new, **call_repl}, line_repl)
    return out.code, f"{kernel}: up to {max_rows} rows of program axis {axis} per program (~{elems} elements)"


def one_pass_rows(source: str, kernel: str, elems: int, max_rows: int) -> tuple[str, str] | None:
    """Several rows per program of a multi-pass row kernel, each row read once: ``row_resident`` first (the row as
    one block where it fits, the original passes kept for longer rows), then the rows on its one-block sibling. The
    rows alone keep one program reading its rows once per pass (H100, 2026-12-07: headwise_layernorm's three passes
    of 128 elements, 16 rows a program, 0.88-0.93 of torch.compile's one pass); the one-block sibling alone keeps a
    program per row. None where the kernel has no such passes or its sibling takes no rows."""
    merged, done = row_resident_source(source, ROW_RESIDENT_MAX, only={kernel})
    if kernel not in done:
        return None
    res = rows_source(merged, kernel + "_row", elems, max_rows)
    if res is None:
        return None
    return res[0], f"{kernel}: rows up to {ROW_RESIDENT_MAX} elements read once (longer rows keep the passes); " + res[1]


@rewrite("rows_per_program", "a grid of tiny programs (one row/token/head each) -> several rows per program as a "
                             "2-D block", priority=9, also=("launch_config",))
def rows_per_program(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("rows_per_program", ANSWERS)
    caps = {f.kernel: row_cap(int(f.metric["programs"])) for f in motivating
            if isinstance(f.metric, dict) and isinstance(f.metric.get("programs"), (int, float))}
    capped: set[str] = set()

    def build(source: str, kernel: str, elems: int, max_rows: int):   # where the cap binds, one size is enough
        if kernel in capped:
            return None
        cap = caps.get(kernel, max_rows)
        if cap < max_rows:
            capped.add(kernel)
        return one_pass_rows(source, kernel, elems, min(max_rows, cap)) or \
            rows_source(source, kernel, elems, min(max_rows, cap))

    return ctx.per_kernel("rows_per_program", motivating, SIZES, build,
                          lambda k, e, m: {"kernel": k, "elements": e, "max_rows": min(m, caps.get(k, m))},
                          "programs move kilobytes instead of a few dozen bytes: launch and scheduling cost per "
                          "byte falls, and each warp's accesses cover whole rows")
