"""Make loops with global loads pipelineable.

- ``for k in range(lo, hi, step)`` -> ``for k in tl.range(lo, hi, step, num_stages=S)`` (S = 3 or 4), and
  ``num_stages=S`` on the launch of a kernel whose loop feeds a ``tl.dot``. With an explicit
  ``num_stages`` Triton's pipeliner also software-pipelines loads that feed no dot (row loops of
  reductions) through async copies.
- loop-invariant address math hoisted: a load ``tl.load(P + ... + rk[..] * s + ...)`` where
  ``rk = k + tl.arange(0, B)`` is recomputed every iteration becomes a pointer block built once
  before the loop and advanced by ``step * s`` per iteration (masks still use rk).

Not touched: loops holding a store or atomic to a pointer the kernel also loads anywhere (a
prefetched load could see a stale value written by another thread), loops with break/continue,
static (unrolled) loops, loops already using tl.range with num_stages.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.launch_edit import EditRefused, set_values
from tritondx.tools.rewrite.launches import analyze
from tritondx.tools.rewrite.cst_util import (
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


def _loaded_and_stored(fn: cst.FunctionDef) -> tuple[set[str], set[str]]:
    params = set(param_names(fn))
    loaded: set[str] = set()
    stored: set[str] = set()
    for c in calls_named(fn, "tl.load"):
        if c.args:
            loaded |= names_in(c.args[0].value) & params
    for name in ("tl.store", "tl.atomic_add", "tl.atomic_max", "tl.atomic_min", "tl.atomic_cas", "tl.atomic_xchg"):
        for c in calls_named(fn, name):
            if c.args:
                stored |= names_in(c.args[0].value) & params
    return loaded, stored


def _pipelineable(fn: cst.FunctionDef, loop: cst.For) -> bool:
    if not isinstance(loop.iter, cst.Call) or dotted(loop.iter.func) != "range":
        return False
    if not calls_named(loop.body, "tl.load"):
        return False
    bad = [False]

    class V(cst.CSTVisitor):
        def visit_Break(self, n) -> None:
            bad[0] = True

        def visit_Continue(self, n) -> None:
            bad[0] = True

        def visit_For(self, n) -> bool:
            # nested loops: only the innermost loops are candidates
            bad[0] = True
            return False

    loop.body.visit(V())
    if bad[0]:
        return False
    _, stored = _loaded_and_stored(fn)
    loop_loaded = set()
    for c in calls_named(loop.body, "tl.load"):
        loop_loaded |= names_in(c.args[0].value) & set(param_names(fn))
    return not (loop_loaded & stored)


def _loops(fn: cst.FunctionDef) -> list[cst.For]:
    out: list[cst.For] = []

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            out.append(n)

    fn.visit(V())
    return out


def _range_args(loop: cst.For) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression] | None:
    args = [a.value for a in loop.iter.args if a.keyword is None]
    if len(args) == 1:
        return cst.Integer("0"), args[0], cst.Integer("1")
    if len(args) == 2:
        return args[0], args[1], cst.Integer("1")
    if len(args) == 3:
        return args[0], args[1], args[2]
    return None


def _stage_loop(loop: cst.For, stages: int) -> cst.For:
    args = [a for a in loop.iter.args if a.keyword is None]
    call = cst.Call(func=expr("tl.range"), args=[cst.Arg(a.value) for a in args])
    call = with_args(call, list(call.args) + [make_arg(cst.Integer(str(stages)), "num_stages")])
    return loop.with_changes(iter=call)


def _addr_terms(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and not e.lpar:
        return _addr_terms(e.left) + _addr_terms(e.right)
    return [e]


def _sum(terms: list[cst.BaseExpression]) -> cst.BaseExpression:
    out = terms[0]
    for t in terms[1:]:
        out = cst.BinaryOperation(left=out, operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                                             whitespace_after=cst.SimpleWhitespace(" ")), right=t)
    return out


def _hoist(fn: cst.FunctionDef, loop: cst.For) -> tuple[list[cst.BaseStatement], cst.For] | None:
    """Pointer blocks for the loads of ``loop`` that move with the loop variable; None if none apply."""
    if not isinstance(loop.target, cst.Name):
        return None
    rng = _range_args(loop)
    if rng is None:
        return None
    lo, _, step = rng
    k = loop.target.value
    body = list(loop.body.body)
    # rk = k + tl.arange(0, B) defined in the loop
    ranges: dict[str, cst.BaseExpression] = {}
    for st in body:
        if isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Assign) and \
                isinstance(st.body[0].targets[0].target, cst.Name):
            v = st.body[0].value
            if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add) and \
                    code_of(v.left) == k and isinstance(v.right, cst.Call) and dotted(v.right.func) == "tl.arange":
                ranges[st.body[0].targets[0].target.value] = v.right
    if not ranges:
        return None
    assigned_in_loop = set()
    for st in body:
        if isinstance(st, cst.SimpleStatementLine):
            for s in st.body:
                if isinstance(s, (cst.Assign, cst.AugAssign)):
                    t = s.targets[0].target if isinstance(s, cst.Assign) else s.target
                    if isinstance(t, cst.Name):
                        assigned_in_loop.add(t.value)
    taken = names_in(fn) | set(param_names(fn))
    pre: list[cst.BaseStatement] = []
    incs: list[cst.BaseStatement] = []
    repl: dict[int, cst.CSTNode] = {}
    for load in calls_named(loop.body, "tl.load"):
        addr = load.args[0].value
        terms = _addr_terms(addr)
        moving = [t for t in terms if names_in(t) & set(ranges)]
        if len(moving) != 1 or not (names_in(addr) & set(ranges)):
            continue
        t = moving[0]
        # t = rk[...] * s  |  s * rk[...]  |  rk[...]  |  rk
        rk, stride = None, None
        core = t
        if isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            for a, b in ((t.left, t.right), (t.right, t.left)):
                if names_in(a) & set(ranges) and not (names_in(b) & (set(ranges) | assigned_in_loop | {k})):
                    core, stride = a, b
        base = core.value if isinstance(core, cst.Subscript) else core
        if not isinstance(base, cst.Name) or base.value not in ranges or \
                (isinstance(t, cst.BinaryOperation) and stride is None):
            continue
        rk = base.value
        others = [x for x in terms if x is not t]
        if any(names_in(x) & (assigned_in_loop | {k}) for x in others):
            continue
        stem = terms[0].value[:-4] if isinstance(terms[0], cst.Name) and terms[0].value.endswith("_ptr") else rk
        name = f"{stem}_ptrs"
        i = 0
        while name in taken:
            i += 1
            name = f"{stem}_ptrs{i}"
        taken.add(name)
        start = ranges[rk] if code_of(lo) == "0" else cst.BinaryOperation(
            left=paren(lo), operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                             whitespace_after=cst.SimpleWhitespace(" ")), right=ranges[rk])
        init = subst(addr, {rk: start})
        pre.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], init)]))
        inc = code_of(paren(step)) if stride is None else f"{code_of(paren(step))} * {code_of(paren(stride))}"
        incs.append(stmt(f"{name} += {inc}"))
        new_args = [cst.Arg(cst.Name(name))] + list(load.args[1:])
        repl[id(load)] = with_args(load, new_args)
    if not pre:
        return None
    new_loop = replace_nodes(loop, repl)
    new_loop = new_loop.with_changes(body=new_loop.body.with_changes(body=list(new_loop.body.body) + incs))
    return pre, new_loop


def pipeline_source(source: str, stages: int | None, hoist: bool) -> tuple[str, list[str]]:
    module = parse(source)
    kernels = jit_functions(module)
    changed: list[str] = []
    new_fns: dict[str, cst.FunctionDef] = {}
    dot_kernels: set[str] = set()
    for name, fn in kernels.items():
        loops = [lp for lp in _loops(fn) if _pipelineable(fn, lp)]
        if not loops:
            continue
        repl: dict[int, cst.CSTNode] = {}
        for lp in loops:
            new = lp
            pre: list[cst.BaseStatement] = []
            if hoist:
                h = _hoist(fn, lp)
                if h:
                    pre, new = h
            if stages:
                new = _stage_loop(new, stages)
            if new is not lp:
                repl[id(lp)] = cst.FlattenSentinel(pre + [new]) if pre else new
                if calls_named(lp.body, "tl.dot"):
                    dot_kernels.add(name)
        if repl:
            new_fns[name] = replace_nodes(fn, repl)
            changed.append(name)
    if not changed:
        return source, []
    module = module.with_changes(body=[new_fns.get(s.name.value, s) if isinstance(s, cst.FunctionDef) else s
                                       for s in module.body])
    # An autotuned kernel's configs carry num_stages: a launch keyword would clash with them
    # ("got multiple values for keyword argument 'num_stages'", seen on the H200 on l3_skinny_gemm).
    autotuned = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)
                 and any("autotune" in cst.Module(body=[]).code_for_node(d.decorator) for d in s.decorators)}
    dot_kernels -= autotuned
    if stages and dot_kernels:
        # num_stages where the launch defines it (a literal, a local, a helper's default ...) or at the call;
        # a computed num_stages is left alone
        src = module.code
        want = {}
        for site in analyze(src).sites:
            d = site.params.get("num_stages")
            if site.kernel in dot_kernels and d is not None and d.kind != "computed":
                want[site.kernel] = {"num_stages": stages}
        if want:
            try:
                return set_values(src, want), changed
            except EditRefused:
                pass
    return module.code, changed


@rewrite("pipelining", "loops made pipelineable: tl.range(num_stages=3/4), num_stages on dot kernels, "
                       "loop-invariant address math hoisted into advancing pointer blocks", priority=30)
def pipelining(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("pipelining")
    if not motivating:
        return []
    ids = [f.id for f in motivating]
    out = []
    seen = {ctx.spec.source}
    for stages, hoist in ((3, True), (4, True), (3, False), (None, True)):
        src, kernels = pipeline_source(ctx.spec.source, stages, hoist)
        if not kernels or src in seen:
            continue
        seen.add(src)
        what = ", ".join(x for x in (f"num_stages={stages}" if stages else "", "hoisted address math" if hoist else "")
                         if x)
        out.append(Proposal(
            "pipelining", src, {"num_stages": stages, "hoist": hoist, "kernels": kernels},
            f"{', '.join(kernels)}: loops {what}", ids,
            "the next iterations' loads are in flight while this one computes (async copies); hoisting removes "
            "per-iteration index math on the whole tile; gains where the loop waited on memory (IR: loads not "
            "pipelined), little for kernels already pipelined by default (dot operands at num_stages=3)"))
    return out
