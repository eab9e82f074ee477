"""Index arithmetic as wide as the sizes need, decided by the launcher.

- narrowing: ``pid.to(tl.int64)`` (pid a program id) makes every offset derived from it 64-bit, and
  64-bit ``//`` and ``%`` are emulated on the GPU. It becomes
  ``pid.to(tl.int64 if WIDE_INDEX else tl.int32)`` with the constexpr ``WIDE_INDEX`` computed in the
  launcher: true when any tensor argument has 2**30 elements or more (or an int argument is that
  large), so offsets keep their headroom below 2**31.
- widening: in a kernel with no 64-bit index at all, when the task's bench shapes reach 2**31 elements,
  program ids get the same conditional cast, so that the large sizes do not overflow.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    add_params,
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    param_names,
    parse,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.taskinfo import numel, task_info

HELPER = '''
def _tdx_wide_index(*args):
    """True when a tensor argument (or a size) reaches 2**30 elements: index math must then be 64-bit."""
    for a in args:
        n = a.numel() if isinstance(a, torch.Tensor) else abs(a) if isinstance(a, int) else 0
        if n >= 2 ** 30:
            return True
    return False
'''

WIDE = "tl.int64 if WIDE_INDEX else tl.int32"


def _pid_names(fn: cst.FunctionDef) -> set[str]:
    names: dict[str, int] = {}
    pid_like: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                if isinstance(t.target, cst.Name):
                    names[t.target.value] = names.get(t.target.value, 0) + 1
                    if isinstance(n.value, cst.Call) and dotted(n.value.func) == "tl.program_id":
                        pid_like.add(t.target.value)

    fn.visit(V())
    return {n for n in pid_like if names[n] == 1}


class Narrow(cst.CSTTransformer):
    def __init__(self, pids: set[str]):
        self.pids = pids
        self.count = 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        f = updated.func
        if isinstance(f, cst.Attribute) and f.attr.value == "to" and len(updated.args) == 1 and \
                code_of(updated.args[0].value) == "tl.int64":
            recv = f.value
            if (isinstance(recv, cst.Name) and recv.value in self.pids) or \
                    (isinstance(recv, cst.Call) and dotted(recv.func) == "tl.program_id"):
                self.count += 1
                return updated.with_changes(args=[cst.Arg(expr(WIDE))])
        return updated


class Widen(cst.CSTTransformer):
    def __init__(self):
        self.count = 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted(original.func) == "tl.program_id":
            self.count += 1
            return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("to")), args=[cst.Arg(expr(WIDE))])
        return updated


def index_source(source: str, widen_ok: bool) -> tuple[str, dict[str, str]]:
    module = parse(source)
    kernels = jit_functions(module)
    new_fns: dict[str, cst.FunctionDef] = {}
    done: dict[str, str] = {}
    for name, fn in kernels.items():
        if "WIDE_INDEX" in param_names(fn):
            continue
        t = Narrow(_pid_names(fn))
        new = fn.visit(t)
        if t.count:
            new_fns[name] = add_params(new, ["WIDE_INDEX"], constexpr=True)
            done[name] = f"{t.count} program-id cast(s) to int64 made conditional"
        elif widen_ok and "tl.int64" not in code_of(fn):
            w = Widen()
            new = fn.visit(w)
            if w.count:
                new_fns[name] = add_params(new, ["WIDE_INDEX"], constexpr=True)
                done[name] = f"{w.count} program id(s) widened to int64 when the sizes need it"
    if not done:
        return source, {}
    hosted = [(h, s) for h, s in host_launch_sites(module) if s.kernel in done]   # launch() or its helpers
    sites = {id(s.call): s for _, s in hosted}
    if not sites:
        return source, {}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            s = sites.get(id(original))
            if s is None:
                return updated
            consts = set(constexpr_names(kernels[s.kernel]))
            args = [code_of(v) for p, v in s.bound.items() if p not in consts]
            return add_call_kwargs(updated, {"WIDE_INDEX": expr(f"_tdx_wide_index({', '.join(args)})")})

    t = T()
    hosts = {id(h): h for h, _ in hosted}
    first = next(st for st in module.body if id(st) in hosts)   # the size check goes before the first launcher
    have = "_tdx_wide_index" in {x.name.value for x in module.body if isinstance(x, cst.FunctionDef)}
    body = []
    for st in module.body:
        if isinstance(st, cst.FunctionDef) and st.name.value in new_fns:
            body.append(new_fns[st.name.value])
        elif id(st) in hosts:
            if st is first and not have:
                helper = cst.parse_module(HELPER).body[0]
                body.append(helper.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
            body.append(st.visit(t))
        else:
            body.append(st)
    return module.with_changes(body=body).code, done


@rewrite("index_width", "64-bit index math only when the sizes need it (launcher-time check)", priority=42)
def index_width(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("index_width")
    if not motivating:
        return []
    # a bench shape is a tensor shape only for plain 1-D/2-D tasks (others encode sizes like (M, N, K))
    big = any(numel(s) >= 2 ** 31 for s in task_info(ctx.original.source).shapes("BENCH_SHAPES")
              if len(s) <= 2 and all(isinstance(x, int) for x in s))
    source, done = index_source(ctx.spec.source, widen_ok=big)
    if not done:
        return []
    narrowing = any("conditional" in v for v in done.values())
    return [Proposal("index_width", source, {"kernels": done}, "; ".join(f"{k}: {v}" for k, v in done.items()),
                     [f.id for f in motivating],
                     "32-bit offsets below 2**30 elements: half the integer registers, and 32-bit instead of emulated "
                     "64-bit division/modulo in index math (a large gain where offsets are divided per element)"
                     if narrowing else
                     "correct offsets past 2**31 elements; no speed change at sizes that fit 32 bits")]
