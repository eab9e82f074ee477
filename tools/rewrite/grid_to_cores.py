"""A grid-stride kernel launched on a fixed number of programs -> as many programs as this GPU has SMs (x k).

The kernel walks its work as ``for t in range(pid, n, tl.num_programs(0))`` (or with the program count passed
as an argument), so any program count is correct; a literal count (32, 108: a core count of some other device), or
one capped with ``min(..., 48)``, leaves SMs idle on a larger GPU or under-fills each SM. The launch site's grid element (and the argument that
carries the same count, when the kernel takes one) becomes ``_tdx_sm_count(t) * k``: the SM count of the device
of the launch's first tensor argument (132 on an H200), times k programs per SM. CPU tensors (the interpreter)
get the H200's count, which only changes how the work is divided.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    code_of,
    expr,
    insert_before_function,
    jit_functions,
    parse,
    replace_nodes,
    stmts,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.evidence.triage_patterns import capped_count, grid_stride_loop, int_constant

HELPER = '''
def _tdx_sm_count(t):
    """SMs of the tensor's device (132 on an H200); CPU tensors (the interpreter) get the H200's count."""
    if t.is_cuda:
        return torch.cuda.get_device_properties(t.device).multi_processor_count
    return 132
'''
#: programs per SM proposed
PER_SM = (1, 4)


def cores_source(source: str, per_sm: int) -> tuple[str, list[str]] | None:
    module = parse(source)
    tree = ast.parse(source)
    kernels = jit_functions(module)
    ast_kernels = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in kernels}
    ast_hosts = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    repl, done = {}, []
    for host, site in host_launch_sites(module):
        loop = grid_stride_loop(ast_kernels[site.kernel])
        if loop is None:
            continue
        axis, step = loop
        grid = site.grid
        if not isinstance(grid, cst.Tuple) or axis >= len(grid.elements):
            continue
        g = grid.elements[axis].value
        e = ast.parse(code_of(g), mode="eval").body
        n = int_constant(e, ast_hosts[host.name.value], tree) or capped_count(e, ast_hosts[host.name.value], tree)
        tensor = next((v for v in site.bound.values() if isinstance(v, cst.Name) and v.value[:1].islower()), None)
        if n is None or tensor is None:
            continue
        new = expr(f"_tdx_sm_count({tensor.value}) * {per_sm}")
        els = list(grid.elements)
        els[axis] = els[axis].with_changes(value=new)
        call = site.call
        sl = call.func.slice
        args = list(call.args)
        if not step.startswith("tl.num_programs"):
            bound = site.bound.get(step)
            if bound is None or code_of(bound) != code_of(g):
                continue
            args = [a.with_changes(value=new) if a.value is bound else a for a in args]
        call = call.with_changes(args=args, func=call.func.with_changes(
            slice=[sl[0].with_changes(slice=cst.Index(value=grid.with_changes(elements=els)))]))
        repl[id(site.call)] = call
        done.append(f"{site.kernel}: {n} programs -> {per_sm} per SM")
    if not repl:
        return None
    out = replace_nodes(module, repl)
    if "def _tdx_sm_count(" not in source:
        first = next(s.name.value for s in out.body if isinstance(s, cst.FunctionDef) and s.name.value not in kernels)
        out = insert_before_function(out, first, stmts(HELPER))
    return out.code, done


@rewrite("grid_to_cores", "a grid-stride kernel on a literal program count -> the device's SM count x k programs",
         priority=30)
def grid_to_cores(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("grid_to_cores")
    if not motivating:
        return []
    out = []
    for k in PER_SM:
        res = cores_source(ctx.spec.source, k)
        if res is None:
            return out
        src, done = res
        out.append(Proposal("grid_to_cores", src, {"per_sm": k}, "; ".join(done), [f.id for f in motivating],
                            "every SM gets work (and k programs per SM hide latency); the same loop walks the work "
                            "with the new stride"))
    return out
