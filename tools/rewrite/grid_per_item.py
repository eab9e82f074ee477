"""A grid sized for another device -> one program per item (row, tile) of the grid-stride loop.

A kernel written for a fixed number of programs (32 or 48: a core count of an NPU, or a persistent grid sized
for some GPU) walks its work as ``for row in range(pid, M, tl.num_programs(0))`` (or a step passed as an
argument). On a device with more SMs, or whenever the count does not fill it, part of the chip idles and each
program walks its items one after the other. The loop goes: each program takes the item ``row = pid`` and the
launch grid on that axis becomes the loop's bound ``M`` (the host expression bound to it at the launch site):
one program per item, scheduled by the hardware.

Sound only where the iterations are independent: the loop is the kernel's last top-level statement, starts at
the program id and steps by the program count (``tl.num_programs`` or a parameter used nowhere else), has no
``break``/``continue``/``return`` of its own and no ``else``, and nothing assigned in it is read or assigned
before it (no state carried from one item to the next). The bound must be a host-computable expression of the
kernel's parameters (``M``, ``tl.cdiv(N, BLOCK)``), each bound to a pure argument at every launch site.

The alternative on the same finding is ``grid_to_cores`` (SM count x k programs read at launch time, the loop
kept); both are proposed, the verifier times them.
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
    jit_functions,
    names_in,
    param_names,
    parse,
    replace_nodes,
    stmts,
    subst,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.tile_2d import _axis, _grid_tuple, _pid_names, _pure

#: detectors whose findings this family answers (besides findings that suggest it by name)
ANSWERS = ("fixed_program_count", "grid_too_small", "capped_program_count")


def _loop_plan(fn: cst.FunctionDef) -> tuple[int, cst.For, int, str, str | None] | None:
    """(index of the loop in the body, loop, axis, program-id name or '', step parameter or None)."""
    body = list(fn.body.body)
    if not body or not isinstance(body[-1], cst.For):
        return None
    loop: cst.For = body[-1]
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and len(it.args) == 3
            and all(a.keyword is None for a in it.args) and isinstance(loop.target, cst.Name)) or loop.orelse:
        return None
    start, step = it.args[0].value, it.args[2].value
    pid_names: dict[str, int] = {}
    for st in body[:-1]:
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign) \
                and isinstance(st.body[0].targets[0].target, cst.Name) and isinstance(st.body[0].value, cst.Call) \
                and dotted(st.body[0].value.func) == "tl.program_id" and _axis(st.body[0].value) is not None:
            pid_names[st.body[0].targets[0].target.value] = _axis(st.body[0].value)
    if isinstance(start, cst.Call) and dotted(start.func) == "tl.program_id" and _axis(start) is not None:
        axis, pid = _axis(start), ""
    elif isinstance(start, cst.Name) and start.value in pid_names:
        axis, pid = pid_names[start.value], start.value
    else:
        return None
    params = param_names(fn)
    step_param = None
    if isinstance(step, cst.Call) and dotted(step.func) == "tl.num_programs" and _axis(step) == axis:
        pass
    elif isinstance(step, cst.Name) and step.value in params and step.value not in constexpr_names(fn):
        step_param = step.value
    else:
        return None
    # the program count means nothing else anywhere in the kernel
    if len([c for c in calls_named(fn, "tl.num_programs") if _axis(c) == axis]) > (step_param is None):
        return None
    if step_param is not None and sum(1 for n in _names(fn) if n == step_param) != 2:   # the parameter, the step
        return None
    # no exit of the loop's own, no state carried between iterations
    if _exits(loop.body):
        return None
    # the body sees its item only through the loop variable: a name of the program id (a per-program partial's
    # slot) would mean something else with one program per item
    if names_in(loop.body) & _pid_names(fn, axis) or \
            any(_axis(c) == axis for c in calls_named(loop.body, "tl.program_id")):
        return None
    inside = _assigned(loop.body) | {loop.target.value}
    before = set().union(set(), *(names_in(s) for s in body[:-1]))
    if inside & (before | set(params)):
        return None
    return len(body) - 1, loop, axis, pid, step_param


def _names(node: cst.CSTNode) -> list[str]:
    out: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n.value)

    node.visit(V())
    return out


def _assigned(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            out.update(names_in(n.target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            out.update(names_in(n.target))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            out.update(names_in(n.target))

        def visit_For(self, n: cst.For) -> None:
            out.update(names_in(n.target))

    node.visit(V())
    return out


def _exits(block: cst.CSTNode) -> bool:
    """A break/continue that leaves this loop's iteration, or any return."""
    found = [False]

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

        def visit_Return(self, n) -> None:
            found[0] = True

        def visit_Break(self, n) -> None:
            if self.depth == 0:
                found[0] = True

        def visit_Continue(self, n) -> None:
            if self.depth == 0:
                found[0] = True

    block.visit(V())
    return found[0]


def _host_bound(end: cst.BaseExpression, fn: cst.FunctionDef, bound: dict[str, cst.BaseExpression]
                ) -> cst.BaseExpression | None:
    """The loop bound as a host expression at one launch site: parameters replaced by their (pure) arguments,
    ``tl.cdiv`` by ``triton.cdiv``; None when it reads anything else."""
    params = set(param_names(fn))
    for c in _all_calls(end):
        if dotted(c.func) not in ("tl.cdiv", "triton.cdiv", "min", "max"):
            return None
    used = names_in(end) - {"tl", "triton", "cdiv", "min", "max"}
    if not used <= params or any(p not in bound or not _pure(bound[p]) for p in used):
        return None
    if any(isinstance(n, cst.Attribute) and dotted(n) not in ("tl.cdiv", "triton.cdiv") for n in _attrs(end)):
        return None
    host = subst(end, {p: _paren(bound[p]) for p in used})
    return expr(code_of(host).replace("tl.cdiv(", "triton.cdiv("))


def _paren(e: cst.BaseExpression) -> cst.BaseExpression:
    atom = isinstance(e, (cst.Name, cst.Integer, cst.Call, cst.Attribute, cst.Subscript))
    return e if atom else expr(f"({code_of(e)})")


def _all_calls(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(V())
    return out


def _attrs(node: cst.CSTNode) -> list[cst.Attribute]:
    out: list[cst.Attribute] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            out.append(n)
            return False

    node.visit(V())
    return out


def per_item_source(source: str, kernels: set[str] | None = None) -> tuple[str, list[str]] | None:
    """Every grid-stride kernel (of ``kernels``, when given) made one program per item; None when none can be."""
    module = parse(source)
    jit = jit_functions(module)
    sites = host_launch_sites(module)
    repl: dict[int, cst.CSTNode] = {}
    done: list[str] = []
    for name, fn in jit.items():
        if kernels is not None and name not in kernels:
            continue
        if any(dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
               .endswith(("autotune", "heuristics")) for d in fn.decorators):
            continue
        plan = _loop_plan(fn)
        ks = [(h, s) for h, s in sites if s.kernel == name]
        if plan is None or not ks:
            continue
        i, loop, axis, pid, step_param = plan
        end = loop.iter.args[1].value
        site_repl: dict[int, cst.CSTNode] = {}
        for host, site in ks:
            g = _grid_tuple(host, site.grid) if site.grid is not None else None
            hb = _host_bound(end, fn, site.bound)
            if g is None or hb is None or axis >= len(g[0]):
                site_repl = {}
                break
            els = list(g[0])
            els[axis] = hb
            call = site.call
            sl = call.func.slice
            site_repl[id(call)] = call.with_changes(func=call.func.with_changes(
                slice=[sl[0].with_changes(slice=cst.Index(value=g[1](els)))]))
        if not site_repl:
            continue
        start = cst.Name(pid) if pid else expr(f"tl.program_id({axis})")
        head = stmts(f"{loop.target.value} = {code_of(start)}  # one program per item (was a loop striding by the "
                     "program count)\n")
        body = list(fn.body.body)
        new_fn = fn.with_changes(body=fn.body.with_changes(body=body[:i] + head + list(loop.body.body)))
        repl[id(fn)] = new_fn
        repl.update(site_repl)
        done.append(f"{name}: one program per {loop.target.value} (grid axis {axis} = {code_of(end)})")
    if not done:
        return None
    return replace_nodes(module, repl).code, done


@rewrite("grid_per_item", "a grid-stride kernel on a program count sized for another device -> one program per "
                          "item of its loop (the grid is the loop's bound)", priority=29,
         also=("grid_to_cores", "persistent", "split_k"))
def grid_per_item(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("grid_per_item", ANSWERS)
    if not motivating:
        return []
    res = per_item_source(ctx.spec.source)
    if res is None:
        return []
    src, done = res
    return [Proposal("grid_per_item", src, {"kernels": sorted(d.split(":")[0] for d in done)}, "; ".join(done),
                     [f.id for f in motivating],
                     "as many programs as items: every SM gets work whatever the device, and the hardware schedules "
                     "the items instead of each program walking its share in turn")]
