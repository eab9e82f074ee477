"""Python-level per-element loops in a kernel turned into block operations.

Scalar loops (``for i in range(n): v = tl.load(p + base + i) ...``) whose body is an elementwise map
(stores indexed by i) and/or reductions into accumulators defined before the loop
(``acc += e``, ``acc = acc + e``, ``acc = tl.maximum(acc, e)``, ``tl.minimum``) become

    for _s in range(lo, n, VEC):
        i = _s + tl.arange(0, VEC)
        _lane = i < n
        ... loads/stores masked with _lane, acc += tl.sum(tl.where(_lane, e, 0.0), axis=0) ...

Row loops (``for r in range(R): x = tl.load(P + r * s + cols, mask=m, other=0.0); acc += x`` with a
vector accumulator) become 2-D tiles of BLOCK_R rows reduced with ``tl.sum(..., axis=0)``.

Rejected: control flow in the body, an accumulator read anywhere else in the loop, a temporary used
after the loop, stores whose address does not move with the loop variable, a pointer both loaded
and stored in the loop (a loop-carried dependence through memory).
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    add_params,
    calls_named,
    code_of,
    dotted,
    expr,
    jit_functions,
    make_arg,
    names_in,
    param_names,
    paren,
    parse,
    replace_nodes,
    stmt,
    subst,
    with_args,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.launch_config import prepare

REDUCE = {"sum": ("tl.sum", "0"), "max": ("tl.max", 'float("-inf")'), "min": ("tl.min", 'float("inf")')}


def _range(loop: cst.For) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and isinstance(loop.target, cst.Name)):
        return None
    args = [a.value for a in it.args if a.keyword is None]
    if any(a.keyword for a in it.args):
        return None
    if len(args) == 1:
        return cst.Integer("0"), args[0]
    if len(args) == 2:
        return args[0], args[1]
    if len(args) == 3 and code_of(args[2]) == "1":
        return args[0], args[1]
    return None


def _simple_lines(body: cst.BaseSuite) -> list[cst.BaseSmallStatement] | None:
    out = []
    for st in body.body:
        if not isinstance(st, cst.SimpleStatementLine):
            return None
        out.extend(st.body)
    return out


def _reduction(s: cst.BaseSmallStatement, accs: set[str]) -> tuple[str, str, cst.BaseExpression] | None:
    """(acc, kind, update expression) for acc += e / acc = acc + e / acc = tl.maximum(acc, e) ..."""
    if isinstance(s, cst.AugAssign) and isinstance(s.target, cst.Name) and s.target.value in accs and \
            isinstance(s.operator, cst.AddAssign):
        return s.target.value, "sum", s.value
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
        acc = s.targets[0].target.value
        if acc not in accs:
            return None
        v = s.value
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
            if code_of(v.left) == acc and acc not in names_in(v.right):
                return acc, "sum", v.right
            if code_of(v.right) == acc and acc not in names_in(v.left):
                return acc, "sum", v.left
        if isinstance(v, cst.Call) and dotted(v.func) in ("tl.maximum", "tl.minimum", "max", "min") and len(v.args) == 2:
            kind = "max" if dotted(v.func) in ("tl.maximum", "max") else "min"
            a, b = v.args[0].value, v.args[1].value
            if code_of(a) == acc and acc not in names_in(b):
                return acc, kind, b
            if code_of(b) == acc and acc not in names_in(a):
                return acc, kind, a
    return None


def _defined_before(fn: cst.FunctionDef, loop: cst.For) -> set[str]:
    """Names assigned in the kernel outside this loop (accumulator candidates)."""
    out: set[str] = set(param_names(fn))

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> bool:
            return n is not loop

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            out.update(names_in(n.target))

    fn.visit(V())
    return out


def _first_event(stmts_: list[cst.BaseStatement], name: str) -> str | None:
    """'read' / 'write' for the first use of ``name`` in straight-line order (compound statements
    only count when their first event is a read; a write inside one may not happen)."""
    for st in stmts_:
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                reads = names_in(small.value) if isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)) \
                    and small.value is not None else names_in(small)
                if isinstance(small, cst.AugAssign) and name in names_in(small.target):
                    return "read"
                if name in reads:
                    return "read"
                if isinstance(small, cst.Assign) and any(name in names_in(t.target) for t in small.targets):
                    return "write"
        else:
            inner = []
            for part in ("body", "orelse"):
                blk = getattr(st, part, None)
                if blk is None:
                    continue
                if isinstance(blk, (cst.Else,)):
                    blk = blk.body
                if hasattr(blk, "body") and isinstance(blk.body, (list, tuple)):
                    inner.append(list(blk.body))
            head = []
            if isinstance(st, cst.For):
                head = [st.iter]
            elif isinstance(st, (cst.If, cst.While)):
                head = [st.test]
            if any(name in names_in(h) for h in head):
                return "read"
            if isinstance(st, cst.For) and name in names_in(st.target):
                continue   # the loop binds its own value; after it, the old one may still be live
            if any(_first_event(b, name) == "read" for b in inner):
                return "read"
    return None


def _used_after(fn: cst.FunctionDef, loop: cst.For, names: set[str]) -> bool:
    """Any of ``names`` read after the loop before being reassigned (a conservative liveness check)."""
    def walk(block: list[cst.BaseStatement], trail: list[list[cst.BaseStatement]]) -> list[cst.BaseStatement] | None:
        for i, st in enumerate(block):
            if st is loop:
                rest = list(block[i + 1:])
                for outer in reversed(trail):
                    rest += outer
                return rest
            for part in ("body", "orelse"):
                blk = getattr(st, part, None)
                if blk is None or isinstance(st, cst.SimpleStatementLine):
                    continue
                if isinstance(blk, cst.Else):
                    blk = blk.body
                if hasattr(blk, "body") and isinstance(blk.body, (list, tuple)):
                    # statements after an enclosing loop may also run before its next iteration
                    extra = [list(block[i + 1:])] + ([list(blk.body)] if isinstance(st, cst.For) else [])
                    found = walk(list(blk.body), trail + extra)
                    if found is not None:
                        return found
        return None

    after = walk(list(fn.body.body), [])
    if after is None:
        return True
    return any(_first_event(after, n) == "read" for n in names)


def _stored_and_loaded(stmts_: list[cst.BaseSmallStatement], params: set[str]) -> tuple[set[str], set[str]]:
    loaded, stored = set(), set()
    for s in stmts_:
        for c in calls_named(s, "tl.load"):
            loaded |= names_in(c.args[0].value) & params
        for c in calls_named(s, "tl.store") + calls_named(s, "tl.atomic_add"):
            stored |= names_in(c.args[0].value) & params
    return loaded, stored


def _mask_with(call: cst.Call, lane: str) -> cst.Call:
    m = next((a.value for a in call.args if a.keyword and a.keyword.value == "mask"), None)
    new = cst.Name(lane) if m is None else expr(f"{lane} & {code_of(paren(m))}")
    return add_call_kwargs(call, {"mask": new})


def vectorize_scalar_loop_in(fn: cst.FunctionDef, loop: cst.For, vec: int) -> list[cst.BaseStatement] | None:
    """The replacement statements for one scalar loop, or None when it does not qualify."""
    rng = _range(loop)
    if rng is None or loop.orelse is not None:
        return None
    lo, hi = rng
    i = loop.target.value
    body = _simple_lines(loop.body)
    if not body or calls_named(loop.body, "tl.arange"):
        return None
    params = set(param_names(fn))
    if set().union(*(names_in(s) for s in body)) & _vector_names(fn):
        return None   # the body already works on blocks: not a scalar loop
    before = _defined_before(fn, loop)
    loaded, stored = _stored_and_loaded(body, params)
    if loaded & stored:
        return None
    temps: set[str] = set()
    reductions: list[tuple[int, str, str, cst.BaseExpression]] = []
    accs_used: set[str] = set()
    for idx, s in enumerate(body):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and dotted(s.value.func) == "tl.store":
            if i not in names_in(s.value.args[0].value):
                return None
            continue
        red = _reduction(s, before - params - {i})
        if red:
            acc, kind, e = red
            if acc in accs_used or acc in temps:
                return None
            accs_used.add(acc)
            reductions.append((idx, acc, kind, e))
            continue
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
            t = s.targets[0].target.value
            # a temporary: written before it is read in the body (its value never flows in from outside)
            if t == i or t in accs_used or t in params or _first_event(
                    [cst.SimpleStatementLine([x]) for x in body], t) != "write":
                return None
            temps.add(t)
            continue
        return None
    # accumulators are only updated, never read elsewhere in the loop
    for idx, s in enumerate(body):
        red_here = next((r for r in reductions if r[0] == idx), None)
        used = names_in(s) if red_here is None else names_in(red_here[3])
        if used & accs_used:
            return None
    if _used_after(fn, loop, temps | {i}):
        return None
    if not reductions and not any(isinstance(s, cst.Expr) for s in body):
        return None
    lane = "_lane"
    start = "_start"
    taken = names_in(fn) | params
    while lane in taken:
        lane = "_" + lane
    while start in taken:
        start = "_" + start
    new_body: list[cst.BaseStatement] = [stmt(f"{i} = {start} + tl.arange(0, {vec})"),
                                         stmt(f"{lane} = {i} < {code_of(paren(hi))}")]
    for idx, s in enumerate(body):
        masked = {}
        for c in calls_named(s, "tl.load"):
            if i in names_in(c.args[0].value) or names_in(c.args[0].value) & temps:
                masked[id(c)] = _mask_with(c, lane)
        for c in calls_named(s, "tl.store"):
            masked[id(c)] = _mask_with(c, lane)
        red = next((r for r in reductions if r[0] == idx), None)
        if red:
            _, acc, kind, e = red
            e = replace_nodes(e, masked)
            fn_name, neutral = REDUCE[kind]
            part = f"{fn_name}(tl.where({lane}, {code_of(e)}, {neutral}), axis=0)"
            if kind == "sum":
                new_body.append(stmt(f"{acc} += {part}"))
            else:
                new_body.append(stmt(f"{acc} = {'tl.maximum' if kind == 'max' else 'tl.minimum'}({acc}, {part})"))
            continue
        new_body.append(cst.SimpleStatementLine([replace_nodes(s, masked)]))
    new_loop = cst.For(target=cst.Name(start),
                       iter=expr(f"range({code_of(lo)}, {code_of(hi)}, {vec})"),
                       body=cst.IndentedBlock(body=new_body), leading_lines=loop.leading_lines)
    return [new_loop]


# ---------------------------------------------------------------------------------------------
# row loops: for r in range(R): acc += load(P + r * s + cols)
# ---------------------------------------------------------------------------------------------

def _vector_names(fn: cst.FunctionDef) -> set[str]:
    """Names whose value is a block (derived from tl.arange), by a fixpoint over assignments."""
    vec: set[str] = set()
    assigns: list[tuple[str, cst.BaseExpression]] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            if len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                assigns.append((n.targets[0].target.value, n.value))

    fn.visit(V())
    changed = True
    while changed:
        changed = False
        for t, v in assigns:
            if t not in vec and (calls_named(v, "tl.arange") or calls_named(v, "tl.zeros") or
                                 calls_named(v, "tl.full") or names_in(v) & vec):
                vec.add(t)
                changed = True
    return vec


def _terms(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and not e.lpar:
        return _terms(e.left) + _terms(e.right)
    return [e]


def _row_loop(fn: cst.FunctionDef, loop: cst.For, block_r: str) -> cst.For | None:
    rng = _range(loop)
    if rng is None or loop.orelse is not None or code_of(rng[0]) != "0":
        return None
    hi = rng[1]
    r = loop.target.value
    body = _simple_lines(loop.body)
    if not body or calls_named(loop.body, "tl.arange") or calls_named(loop.body, "tl.store"):
        return None
    vec = _vector_names(fn)
    params = set(param_names(fn))
    before = _defined_before(fn, loop)
    accs = {a for a in before - params if a in vec}
    temps: set[str] = set()
    reductions = []
    for idx, s in enumerate(body):
        red = _reduction(s, accs)
        if red:
            reductions.append((idx,) + red)
            continue
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name) and \
                s.targets[0].target.value not in before:
            temps.add(s.targets[0].target.value)
            continue
        return None
    if not reductions or _used_after(fn, loop, temps | {r}):
        return None
    accs_used = {x[1] for x in reductions}
    for idx, s in enumerate(body):
        red_here = next((x for x in reductions if x[0] == idx), None)
        if (names_in(s) if red_here is None else names_in(red_here[3])) & accs_used:
            return None
    rr, full = "_rows", "_tile_mask"
    taken = names_in(fn) | params
    while rr in taken:
        rr = "_" + rr
    while full in taken:
        full = "_" + full
    repl = {}
    masks = []
    for s in body:
        for c in calls_named(s, "tl.load"):
            addr = c.args[0].value
            ts = _terms(addr)
            moving = [t for t in ts if r in names_in(t)]
            if len(moving) != 1:
                return None
            t = moving[0]
            if not (isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply) and
                    r in (code_of(t.left), code_of(t.right))) and code_of(t) != r:
                return None
            new_terms = []
            for x in ts:
                if x is t:
                    new_terms.append(subst(x, {r: expr(f"{rr}[:, None]")}))
                elif names_in(x) & vec:
                    new_terms.append(expr(f"{code_of(paren(x))}[None, :]"))
                else:
                    new_terms.append(x)
            new_addr = new_terms[0]
            for x in new_terms[1:]:
                new_addr = cst.BinaryOperation(left=new_addr, operator=cst.Add(
                    whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")), right=x)
            m = next((a.value for a in c.args if a.keyword and a.keyword.value == "mask"), None)
            if m is not None and not (names_in(m) & vec):
                return None
            mask = f"({rr}[:, None] < {code_of(paren(hi))})" + (f" & {code_of(paren(m))}[None, :]" if m else "")
            masks.append(mask)
            other = next((a for a in c.args if a.keyword and a.keyword.value == "other"), None)
            args = [cst.Arg(new_addr), make_arg(expr(mask), "mask")] + ([other] if other else [])
            repl[id(c)] = with_args(c, args)
    if not repl:
        return None
    if len(set(masks)) != 1:
        return None
    new_body = [stmt(f"{rr} = {r} + tl.arange(0, {block_r})")]
    mask_full = masks[0]
    new_body.append(stmt(f"{full} = {mask_full}"))
    for idx, s in enumerate(body):
        red = next((x for x in reductions if x[0] == idx), None)
        if red:
            _, acc, kind, e = red
            e = replace_nodes(e, repl)
            fn_name, neutral = REDUCE[kind]
            part = f"{fn_name}(tl.where({full}, {code_of(e)}, {neutral}), axis=0)"
            if kind == "sum":
                new_body.append(stmt(f"{acc} += {part}"))
            else:
                new_body.append(stmt(f"{acc} = {'tl.maximum' if kind == 'max' else 'tl.minimum'}({acc}, {part})"))
        else:
            new_body.append(cst.SimpleStatementLine([replace_nodes(s, repl)]))
    return cst.For(target=cst.Name(r), iter=expr(f"range(0, {code_of(hi)}, {block_r})"),
                   body=cst.IndentedBlock(body=new_body), leading_lines=loop.leading_lines)


def _loops(fn: cst.FunctionDef) -> list[cst.For]:
    out: list[cst.For] = []

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            out.append(n)

    fn.visit(V())
    return out


def vectorize_source(source: str, vec: int, tile_elems: int) -> tuple[str, list[str]]:
    module = parse(source)
    kernels = jit_functions(module)
    done: list[str] = []
    new_fns: dict[str, cst.FunctionDef] = {}
    row_kernels: dict[str, str] = {}
    for name, fn in kernels.items():
        repl = {}
        for lp in _loops(fn):
            if calls_named(lp.body, "tl.load") and not any(x is not lp for x in _loops(lp)):
                rep = vectorize_scalar_loop_in(fn, lp, vec)
                if rep:
                    repl[id(lp)] = cst.FlattenSentinel(rep)
                    done.append(f"{name}: scalar loop over {lp.target.value} -> blocks of {vec}")
                    continue
                row = _row_loop(fn, lp, "BLOCK_R")
                if row is not None and "BLOCK_R" not in param_names(fn):
                    repl[id(lp)] = row
                    row_kernels[name] = lp.target.value
                    done.append(f"{name}: loop over rows {lp.target.value} -> 2-D tiles of BLOCK_R rows")
        if repl:
            new = replace_nodes(fn, repl)
            if name in row_kernels:
                new = add_params(new, ["BLOCK_R"], constexpr=True)
            new_fns[name] = new
    if not new_fns:
        return source, []
    module = module.with_changes(body=[new_fns.get(s.name.value, s) if isinstance(s, cst.FunctionDef) else s
                                       for s in module.body])
    if row_kernels:
        # BLOCK_R so that a tile holds about tile_elems elements, from the launch's column block
        _, tunables = prepare(source)
        sites = {id(s.call): s for _, s in host_launch_sites(module) if s.kernel in row_kernels}
        values = {}
        for s in sites.values():
            cols = [t.value for t in tunables if t.kernel == s.kernel]
            values[s.kernel] = max(1, min(64, tile_elems // cols[0])) if len(cols) == 1 else 16

        class T(cst.CSTTransformer):
            def on_leave(self, original, updated):
                if id(original) in sites:
                    return add_call_kwargs(updated, {"BLOCK_R": cst.Integer(str(values[sites[id(original)].kernel]))})
                return updated

        module = module.visit(T())
    return module.code, done


@rewrite("vectorize_scalar_loop", "per-element Python loops in a kernel turned into block loads, stores and "
                                  "reductions (scalar loops -> tl.arange blocks, row loops -> 2-D tiles)", priority=7)
def vectorize_scalar_loop(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("vectorize_scalar_loop")
    if not motivating:
        return []
    out = []
    seen = {ctx.spec.source}
    for vec, tile in ((1024, 4096), (256, 8192)):
        src, done = vectorize_source(ctx.spec.source, vec, tile)
        if not done or src in seen:
            continue
        seen.add(src)
        out.append(Proposal("vectorize_scalar_loop", src, {"vec": vec, "tile_elems": tile, "loops": done},
                            "; ".join(done), [f.id for f in motivating],
                            "one vector load/store per block instead of one scalar access per iteration: many more "
                            "bytes in flight per program (scalar loops are latency-bound; row loops get BLOCK_R rows "
                            "per step)"))
    return out
