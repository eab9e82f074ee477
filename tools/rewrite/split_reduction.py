"""Few long rows: a row reduction split across programs in two stages.

A kernel with one program per row that walks its row in a loop,

    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, N, BLOCK):
        ...
        acc += <block of the row>               # or acc = tl.maximum(acc, ...) / tl.minimum
    total = tl.sum(acc, axis=0)                 # tl.max / tl.min to match
    <scalar work on total, stores>

runs as many programs as rows: with a few long rows most SMs idle and each program streams a whole row alone.
It becomes two kernels: ``<k>_tdx_split`` on a (rows, SPLIT) grid, program (row, s) running the same loop over
its chunk of the row (a whole number of blocks, so every block and mask is the original's) and storing its
partial; and ``<k>_tdx_combine``, one program per row, combining the SPLIT partials with the same reduction
and doing what the original did after its loop. SPLIT is read at launch time: enough programs for 4 per SM of
the device (``_tdx_sm_count``, as grid_to_cores reads it), at most one per block of the row, so a task with many
rows keeps one chunk per row.

Preconditions: the kernel's top level is [statements without stores] + the accumulator's initialization (an
fp32 ``tl.zeros``/``tl.full`` block) + one loop from 0 with the block as its step, updating only the accumulator
(no stores, nothing else carried) + its reduction + the rest (which does not read the loop's names); one program
axis; a 1-D launch grid.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    calls_named,
    code_of,
    constexpr_names,
    dotted,
    expr,
    insert_before_function,
    jit_functions,
    names_in,
    param_names,
    parse,
    stmts,
    subst,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.grid_to_cores import HELPER as SM_HELPER
from tritondx.tools.rewrite.rows_per_program import append_params
from tritondx.tools.rewrite.tile_2d import _axis, _find, _grid_tuple, _pure

ANSWERS = ("launch_grid_small", "grid_too_small")
#: reduction -> (update function of the loop, neutral element)
OPS = {"tl.sum": (None, "0.0"), "tl.max": ("tl.maximum", 'float("-inf")'), "tl.min": ("tl.minimum", 'float("inf")')}
#: programs per SM the split aims at
PER_SM = 4
PART, CHUNK, NSPLIT, SPLIT_P2 = "_tdx_part_ptr", "_tdx_chunk", "_tdx_nsplit", "TDX_SPLIT_P2"


def _single(st: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    return st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None


def kernel_plan(fn: cst.FunctionDef) -> dict | None:
    if any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
           .endswith(("autotune", "heuristics")) for d in fn.decorators):
        return None
    if {PART, CHUNK, NSPLIT, SPLIT_P2} & set(param_names(fn)) or \
            any(_axis(c) != 0 for c in calls_named(fn, "tl.program_id") + calls_named(fn, "tl.num_programs")):
        return None
    if calls_named(fn, "tl.num_programs"):
        return None
    body = list(fn.body.body)
    loops = [i for i, st in enumerate(body) if isinstance(st, cst.For)]
    if len(loops) != 1 or loops[0] < 1 or loops[0] + 1 >= len(body):
        return None
    i = loops[0]
    loop: cst.For = body[i]
    init, red = _single(body[i - 1]), _single(body[i + 1])
    pre, post = body[:i - 1], body[i + 2:]
    # acc = tl.zeros([BLOCK], tl.float32) / tl.full([BLOCK], v, tl.float32)
    if not (isinstance(init, cst.Assign) and isinstance(init.targets[0].target, cst.Name) and len(init.targets) == 1
            and isinstance(init.value, cst.Call) and dotted(init.value.func) in ("tl.zeros", "tl.full")
            and "tl.float32" in code_of(init.value)):
        return None
    acc = init.targets[0].target.value
    # total = tl.sum(acc, axis=0)
    if not (isinstance(red, cst.Assign) and len(red.targets) == 1 and isinstance(red.targets[0].target, cst.Name)
            and isinstance(red.value, cst.Call) and dotted(red.value.func) in OPS and red.value.args
            and code_of(red.value.args[0].value) == acc):
        return None
    op = dotted(red.value.func)
    extra = [a for a in red.value.args[1:] if not (code_of(a.value) in ("0", "-1") and
                                                   (a.keyword is None or a.keyword.value == "axis"))]
    if extra:
        return None
    # for off in range(0, END, BLOCK) with BLOCK a constexpr
    it = loop.iter
    consts = set(constexpr_names(fn))
    if not (isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and len(it.args) == 3
            and code_of(it.args[0].value) == "0" and isinstance(it.args[2].value, cst.Name)
            and it.args[2].value.value in consts) or loop.orelse is not None:
        return None
    end = it.args[1].value
    if not names_in(end) <= set(param_names(fn)) or _find(end, cst.Call):
        return None
    # the loop updates only the accumulator, with the reduction's own operator, and stores nothing
    if calls_named(loop, "tl.store") or any(dotted(c.func).startswith("tl.atomic") for c in _find(loop, cst.Call)):
        return None
    update_fn = OPS[op][0]
    updates = 0
    inside: set[str] = {code_of(loop.target)}
    for n in _find(loop.body, cst.AugAssign) + _find(loop.body, cst.Assign):
        targets = names_in(n.target) if isinstance(n, cst.AugAssign) else set().union(
            *(names_in(t.target) for t in n.targets))
        inside |= targets
        if acc in targets:
            if isinstance(n, cst.AugAssign):
                ok = update_fn is None and isinstance(n.operator, cst.AddAssign)
            else:
                v = n.value
                ok = update_fn is not None and isinstance(v, cst.Call) and dotted(v.func) == update_fn and \
                    acc in {code_of(a.value) for a in v.args}
            if not ok:
                return None
            updates += 1
    if updates == 0:
        return None
    outside = set().union(set(), *(names_in(s) for s in pre + post))
    if (inside - {acc}) & outside or acc in set().union(set(), *(names_in(s) for s in post)):
        return None
    if any(calls_named(s, "tl.store") or _find(s, cst.For) or _find(s, cst.While) for s in pre):
        return None
    if (inside | {acc}) & set(param_names(fn)):
        return None
    return {"i": i, "acc": acc, "op": op, "end": end, "block": it.args[2].value.value, "loop": loop,
            "pre": pre, "post": post, "init": body[i - 1], "red": body[i + 1], "total": red.targets[0].target.value}


def split_kernels(fn: cst.FunctionDef, plan: dict) -> tuple[cst.FunctionDef, cst.FunctionDef]:
    name = fn.name.value
    loop: cst.For = plan["loop"]
    it = loop.iter
    end = code_of(plan["end"])
    chunked = it.with_changes(args=[
        cst.Arg(expr(f"tl.program_id(1) * {CHUNK}")),
        cst.Arg(expr(f"tl.minimum(tl.program_id(1) * {CHUNK} + {CHUNK}, {end})")),
        it.args[2]])
    split_body = plan["pre"] + [plan["init"], loop.with_changes(iter=chunked), plan["red"]] + stmts(
        f"tl.store({PART} + tl.program_id(0).to(tl.int64) * {NSPLIT} + tl.program_id(1), {plan['total']})\n")
    split = fn.with_changes(name=cst.Name(f"{name}_tdx_split"), body=fn.body.with_changes(body=split_body))
    split = _add_params(split, [PART, CHUNK, NSPLIT], [])
    neutral = OPS[plan["op"]][1]
    comb_head = stmts(
        f"_tdx_i = tl.arange(0, {SPLIT_P2})\n"
        f"_tdx_p = tl.load({PART} + tl.program_id(0).to(tl.int64) * {NSPLIT} + _tdx_i, mask=_tdx_i < {NSPLIT}, "
        f"other={neutral})\n"
        f"{plan['total']} = {plan['op']}(_tdx_p, axis=0)  # the partials of the row's {NSPLIT} chunks\n")
    comb = fn.with_changes(name=cst.Name(f"{name}_tdx_combine"),
                           body=fn.body.with_changes(body=plan["pre"] + comb_head + plan["post"]))
    comb = _add_params(comb, [PART, NSPLIT], [SPLIT_P2])
    return split, comb


def _add_params(fn: cst.FunctionDef, plain: list[str], const: list[str]) -> cst.FunctionDef:
    fn = append_params(fn, plain) if plain else fn
    return append_params(fn, const, constexpr=True) if const else fn


def split_source(source: str, per_sm: int = PER_SM) -> tuple[str, list[str]] | None:
    module = parse(source)
    jit = jit_functions(module)
    sites = host_launch_sites(module)
    new_fns: dict[str, tuple[cst.FunctionDef, cst.FunctionDef]] = {}
    stmt_repl: dict[int, list[cst.BaseStatement]] = {}
    done = []
    for name, fn in jit.items():
        plan = kernel_plan(fn)
        ks = [(h, s) for h, s in sites if s.kernel == name]
        if plan is None or not ks:
            continue
        repl: dict[int, list[cst.BaseStatement]] = {}
        for host, site in ks:
            g = _grid_tuple(host, site.grid) if site.grid is not None else None
            used = names_in(plan["end"])
            blk = site.bound.get(plan["block"])
            tensor = next((v for p, v in site.bound.items() if isinstance(v, cst.Name) and p.endswith("ptr")), None) \
                or next((v for v in site.bound.values() if isinstance(v, cst.Name)), None)
            if g is None or len(g[0]) != 1 or blk is None or not _pure(blk) or not _pure(g[0][0]) or \
                    (len(g) > 2 and names_in(g[0][0]) & g[2]) or tensor is None or \
                    any(p not in site.bound or not _pure(site.bound[p]) for p in used) or not site.top_level:
                repl = {}
                break
            end_host = code_of(subst(plan["end"], {p: expr(f"({code_of(site.bound[p])})") for p in used}))
            rows, b = code_of(g[0][0]), code_of(blk)
            args = ", ".join((f"{a.keyword.value}=" if a.keyword else a.star) + code_of(a.value)
                             for a in site.call.args)
            line = host.body.body[site.index]
            taken = names_in(host)
            if {"_tdx_blocks", "_tdx_ns", "_tdx_chunk_v", "_tdx_part"} & taken:
                repl = {}
                break
            code = (f"_tdx_blocks = max(1, triton.cdiv({end_host}, {b}))\n"
                    f"_tdx_ns = max(1, min(_tdx_blocks, triton.cdiv({per_sm} * _tdx_sm_count({tensor.value}), "
                    f"max(1, {rows})), 1024))\n"
                    f"_tdx_chunk_v = triton.cdiv(_tdx_blocks, _tdx_ns) * ({b})\n"
                    f"_tdx_ns = triton.cdiv(_tdx_blocks * ({b}), _tdx_chunk_v)\n"
                    f"_tdx_part = torch.empty(({rows}, _tdx_ns), device={tensor.value}.device, dtype=torch.float32)\n"
                    f"{name}_tdx_split[({rows}, _tdx_ns)]({args}, {PART}=_tdx_part, {CHUNK}=_tdx_chunk_v, "
                    f"{NSPLIT}=_tdx_ns)\n"
                    f"{name}_tdx_combine[({rows},)]({args}, {PART}=_tdx_part, {NSPLIT}=_tdx_ns, "
                    f"{SPLIT_P2}=triton.next_power_of_2(_tdx_ns))\n")
            repl[id(line)] = stmts(code)
        if not repl:
            continue
        stmt_repl.update(repl)
        new_fns[name] = split_kernels(fn, plan)
        done.append(f"{name}: rows split into chunks over a (rows, SPLIT) grid ({plan['op']} of fp32 partials), "
                    "combined by one program per row")
    if not done:
        return None

    class T(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            if id(original) in stmt_repl:
                return cst.FlattenSentinel(stmt_repl[id(original)])
            return updated

    body = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in new_fns:
            a, b = new_fns[s.name.value]
            # every launch of the kernel now goes to the two stages: the original is replaced by them
            body += [a.with_changes(leading_lines=s.leading_lines),
                     b.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])]
        elif isinstance(s, cst.FunctionDef) and s.name.value not in jit:
            body.append(s.visit(T()))
        else:
            body.append(s)
    out = module.with_changes(body=body)
    if "def _tdx_sm_count(" not in source:
        first = next(s.name.value for s in out.body if isinstance(s, cst.FunctionDef) and s.name.value not in jit
                     and not s.name.value.endswith(("_tdx_split", "_tdx_combine")))
        helper = stmts(SM_HELPER)
        helper[-1] = helper[-1].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]) \
            if len(helper) == 1 else helper[-1]
        out = insert_before_function(out, first, helper)
    return out.code, done


@rewrite("split_reduction", "few long rows: a row reduction split across programs in two stages (fp32 partials, "
                            "then one program per row combines them)", priority=28, also=("split_k",))
def split_reduction(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("split_reduction", ANSWERS)
    if not motivating:
        return []
    res = split_source(ctx.spec.source)
    if res is None:
        return []
    src, done = res
    return [Proposal("split_reduction", src, {"per_sm": PER_SM}, "; ".join(done), [f.id for f in motivating],
                     "every SM streams part of a row instead of a few programs streaming whole rows: toward the copy "
                     "bandwidth when rows are few and long; a second tiny kernel combines the partials")]
