"""Unmasked fast path when the shapes divide the block: a constexpr ``EVEN`` flag from the launcher.

A mask is removable when it is exactly a block index compared with a size parameter, ``O < P``, where
``O`` is

- ``pid * B + tl.arange(0, B)`` with pid = ``tl.program_id(a)`` and the launcher's grid on axis ``a`` equal
  to ``triton.cdiv(P_arg, B_arg)`` (so no program runs past the end when ``P % B == 0``), or
- ``s + tl.arange(0, B)`` inside ``for s in range(0, P, B)`` (the loop's own bound).

The kernel body is duplicated under ``if EVEN:`` (those masks and their ``other=`` dropped) and
``else:`` (the original); the launcher passes ``EVEN=(P_arg % B_arg == 0 and ...)``. Masks mixing
other conditions (window bounds, row masks) stay.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
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
    param_names,
    paren,
    parse,
    remove_call_kwargs,
    replace_nodes,
    unwrap_hints,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites, visit_hosts


def _program_axis(e: cst.BaseExpression, pids: dict[str, int]) -> int | None:
    if isinstance(e, cst.Name):
        return pids.get(e.value)
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.program_id" and e.args:
        v = code_of(e.args[0].value).replace("axis=", "")
        return int(v) if v.isdigit() else None
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
        return _program_axis(e.func.value, pids)
    return None


def _arange_block(e: cst.BaseExpression, consts: list[str]) -> str | None:
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.arange" and len(e.args) == 2 and \
            code_of(e.args[0].value) == "0" and isinstance(e.args[1].value, cst.Name) and \
            e.args[1].value.value in consts:
        return e.args[1].value.value
    return None


class _Analysis(cst.CSTVisitor):
    """Block indices (flat and loop) and the names bound to ``O < P`` comparisons.

    A name may be assigned several times (one ``cols = start + tl.arange(0, BLOCK)`` per loop) as long
    as every assignment is the same kind of block index / the same comparison.
    """

    def __init__(self, fn: cst.FunctionDef):
        self.params = set(param_names(fn))
        self.consts = constexpr_names(fn)
        self.pids: dict[str, int] = {}
        self.kinds: dict[str, set] = {}
        self.compares: dict[str, set[str]] = {}
        self.compare_node: dict[str, cst.Comparison] = {}
        self.loop_stack: list[tuple[str, str, str] | None] = []

    def visit_For(self, n: cst.For) -> None:
        info = None
        it = n.iter
        if isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and isinstance(n.target, cst.Name):
            args = [a.value for a in it.args if a.keyword is None]
            if len(args) == 3 and code_of(args[0]) == "0" and isinstance(args[1], cst.Name) and \
                    args[1].value in self.params and isinstance(args[2], cst.Name) and args[2].value in self.consts:
                info = (n.target.value, args[1].value, args[2].value)
        if isinstance(n.target, cst.Name):
            self.kinds.setdefault(n.target.value, set()).add(("other",))
        self.loop_stack.append(info)

    def leave_For(self, n: cst.For) -> None:
        self.loop_stack.pop()

    def _kind(self, v: cst.BaseExpression):
        v = unwrap_hints(v)
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
            for a, b in ((v.left, v.right), (v.right, v.left)):
                blk = _arange_block(b, self.consts)
                if blk is None:
                    continue
                if isinstance(a, cst.BinaryOperation) and isinstance(a.operator, cst.Multiply) and \
                        code_of(a.right) == blk:
                    ax = _program_axis(a.left, self.pids)
                    if ax is not None:
                        return ("flat", ax, blk)
                cur = self.loop_stack[-1] if self.loop_stack else None
                if cur and isinstance(a, cst.Name) and a.value == cur[0] and cur[2] == blk:
                    return ("loop", cur[1], blk)
        return ("other",)

    def visit_Assign(self, n: cst.Assign) -> None:
        if len(n.targets) != 1 or not isinstance(n.targets[0].target, cst.Name):
            for t in n.targets:
                for nm in names_in(t.target):
                    self.kinds.setdefault(nm, set()).add(("other",))
                    self.compares.setdefault(nm, set()).add("<other>")
            return
        name = n.targets[0].target.value
        v = n.value
        if _program_axis(v, {}) is not None:
            self.pids[name] = _program_axis(v, {})
        self.kinds.setdefault(name, set()).add(self._kind(v))
        if isinstance(v, cst.Comparison):
            self.compares.setdefault(name, set()).add(code_of(v))
            self.compare_node[name] = v
        else:
            self.compares.setdefault(name, set()).add("<other>")

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        for nm in names_in(n.target):
            self.kinds.setdefault(nm, set()).add(("other",))
            self.compares.setdefault(nm, set()).add("<other>")

    def block_index(self, name: str):
        ks = self.kinds.get(name, set())
        return next(iter(ks)) if len(ks) == 1 and next(iter(ks))[0] != "other" else None

    def comparison(self, name: str) -> cst.Comparison | None:
        cs = self.compares.get(name, set())
        return self.compare_node.get(name) if len(cs) == 1 and "<other>" not in cs else None


def _bound_pair(c: cst.BaseExpression, an: _Analysis) -> tuple[str, str, str, int | None] | None:
    """``O < P`` -> (kind, P, B, axis) when O is a block index."""
    if not isinstance(c, cst.Comparison) or len(c.comparisons) != 1 or \
            not isinstance(c.comparisons[0].operator, cst.LessThan):
        return None
    o, p = c.left, c.comparisons[0].comparator
    if not (isinstance(o, cst.Name) and isinstance(p, cst.Name) and p.value in an.params):
        return None
    k = an.block_index(o.value)
    if k is None:
        return None
    if k[0] == "flat":
        return "flat", p.value, k[2], k[1]
    if k[0] == "loop" and k[1] == p.value:
        return "loop", p.value, k[2], None
    return None


def even_kernel(source: str, kernel: str) -> tuple[str, list[str]] | None:
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None or "EVEN" in param_names(fn):
        return None
    an = _Analysis(fn)
    fn.visit(an)
    removable: dict[int, tuple[str, str, str, int | None]] = {}
    for call in calls_named(fn, "tl.load") + calls_named(fn, "tl.store"):
        m = next((a.value for a in call.args if a.keyword and a.keyword.value == "mask"), None)
        if m is None:
            continue
        cmp_ = m
        if isinstance(m, cst.Name):
            cmp_ = an.comparison(m.value)
            if cmp_ is None:
                continue
        pair = _bound_pair(cmp_, an)
        if pair:
            removable[id(call)] = pair
    if not removable:
        return None
    hosted = [(h, s) for h, s in host_launch_sites(module) if s.kernel == kernel]   # launch() or its helpers
    if not hosted:
        return None
    pairs = sorted({(k, p, b, ax) for k, p, b, ax in removable.values()}, key=str)
    site_conds: dict[int, cst.BaseExpression] = {}
    for host, site in hosted:
        conds = []
        for kind, p, b, ax in pairs:
            pa, ba = site.bound.get(p), site.bound.get(b)
            if pa is None or ba is None:
                return None
            if kind == "flat":
                grid = site.grid
                if isinstance(grid, cst.Name):
                    vals = local_assignment(host, grid.value)
                    if len(vals) != 1:
                        return None
                    grid = vals[0]
                if not isinstance(grid, cst.Tuple) or ax >= len(grid.elements):
                    return None
                g = grid.elements[ax].value
                if not (isinstance(g, cst.Call) and dotted(g.func) in ("triton.cdiv", "cdiv") and len(g.args) == 2
                        and code_of(g.args[0].value) == code_of(pa) and code_of(g.args[1].value) == code_of(ba)):
                    return None
            conds.append(f"{code_of(paren(pa))} % {code_of(paren(ba))} == 0")
        site_conds[id(site.call)] = expr(" and ".join(dict.fromkeys(conds)))
    # EVEN branch: the same body with the removable masks dropped
    strip = {}
    for call in calls_named(fn, "tl.load") + calls_named(fn, "tl.store"):
        if id(call) in removable:
            strip[id(call)] = remove_call_kwargs(call, {"mask", "other"})
    even_body = replace_nodes(fn.body, strip)
    doc = []
    body = list(fn.body.body)
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        doc, body = [body[0]], body[1:]
        even_body = even_body.with_changes(body=list(even_body.body)[1:])
    branch = cst.If(test=cst.Name("EVEN"), body=even_body,
                    orelse=cst.Else(body=cst.IndentedBlock(body=body)))
    new_fn = add_params(fn.with_changes(body=cst.IndentedBlock(body=doc + [branch])), ["EVEN"], constexpr=True)
    calls = {id(s.call) for _, s in hosted}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            if id(original) in calls:
                return add_call_kwargs(updated, {"EVEN": site_conds[id(original)]})
            return updated

    out = visit_hosts(module, [h for h, _ in hosted], T(), {id(fn): new_fn})
    return out.code, [f"{p} % {b}" for _, p, b, _ in pairs]


@rewrite("mask_removal", "unmasked loads/stores under a constexpr EVEN flag when the sizes divide the block",
         priority=40)
def mask_removal(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("mask_removal")
    if not motivating:
        return []
    source = ctx.spec.source
    done: dict[str, list[str]] = {}
    for k in ctx.spec.kernels:
        r = even_kernel(source, k.name)
        if r:
            source, conds = r
            done[k.name] = conds
    if not done:
        return []
    desc = "; ".join(f"{k}: EVEN when {' and '.join(c)} == 0" for k, c in done.items())
    return [Proposal("mask_removal", source, {"kernels": done}, desc, [f.id for f in motivating],
                     "no bound predicates on loads/stores when the sizes divide the block (the usual bench "
                     "shapes): fewer instructions per element; a few percent at most for memory-bound kernels")]
