"""The fused kernel and its launch, for each kind of chain ``fuse_plan`` finds: flat -> flat (the consumer's
body inlined after the producer's), tile -> flat (epilogue: the consumer runs on the producer's tile) and
flat -> tile (prologue: the producer runs on each tile the consumer loads). Each returns the new module, or None
where a precondition fails."""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.cst_util import (
    assigned_names,
    calls_named,
    code_of,
    dotted,
    expr,
    function,
    jit_functions,
    make_arg,
    names_in,
    param_names,
    rename,
    replace_nodes,
    with_args,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.fuse_plan import Plan, ptr_for, temp_alloc
from tritondx.tools.rewrite.fuse_shapes import elementwise_only, flat_kernel, single_assign, tile_offset
from tritondx.tools.rewrite.ptr_access import ptr_accesses


def _is_2d_alloc(call: cst.Call) -> bool:
    if dotted(call.func) == "torch.empty" and call.args and isinstance(call.args[0].value, cst.Tuple):
        return len(call.args[0].value.elements) == 2 and not any(a.keyword and a.keyword.value in ("memory_format",)
                                                                 for a in call.args)
    return False


def _fresh(base: str, taken: set[str]) -> str:
    if base not in taken:
        taken.add(base)
        return base
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    taken.add(f"{base}_{i}")
    return f"{base}_{i}"


def _kernel_names(fn: cst.FunctionDef) -> set[str]:
    return names_in(fn) | set(param_names(fn))


def _stride_of(e: cst.BaseExpression | None, temp: str, dim: int) -> bool:
    return e is not None and code_of(e).replace(" ", "") in (f"{temp}.stride({dim})", f"{temp}.stride(dim={dim})")


def _numel_of(launch: cst.FunctionDef, e: cst.BaseExpression | None, temp: str, alloc: cst.Call) -> bool:
    """``e`` is T.numel() (directly or through a local assigned once)."""
    if e is None:
        return False
    if isinstance(e, cst.Name):
        vals = [a[1] for st in launch.body.body if (a := single_assign(st)) and a[0] == e.value]
        if len(vals) != 1:
            return False
        e = vals[0]
    c = code_of(e).replace(" ", "")
    return c in (f"{temp}.numel()",)


def _replace_load(node, load: cst.Call, value: cst.BaseExpression, mask_name: str | None):
    other = next((a.value for a in load.args if a.keyword and a.keyword.value == "other"), None)
    if other is not None and mask_name is not None:
        value = cst.Call(func=expr("tl.where"), args=[cst.Arg(cst.Name(mask_name)), cst.Arg(value), cst.Arg(other)])
    return replace_nodes(node, {id(load): value})


def _stored_value(store: cst.Call, ptr: str) -> cst.BaseExpression:
    """The value a store writes, cast to the pointer's element type as the store does."""
    val = store.args[1].value if len(store.args) > 1 and store.args[1].keyword is None else \
        next(a.value for a in store.args if a.keyword and a.keyword.value == "value")
    if isinstance(val, cst.Call) and isinstance(val.func, cst.Attribute) and val.func.attr.value == "to" and \
            code_of(val.args[0].value).replace(" ", "") == f"{ptr}.dtype.element_ty":
        return val
    return cst.Call(func=cst.Attribute(value=val if not isinstance(val, (cst.BinaryOperation, cst.UnaryOperation,
                                                                          cst.Comparison, cst.BooleanOperation))
                                       else val.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]),
                                       attr=cst.Name("to")),
                    args=[cst.Arg(expr(f"{ptr}.dtype.element_ty"))])


def _build_signature(base: cst.FunctionDef, params: list[cst.Param]) -> cst.Parameters:
    plain = [p for p in params if p.annotation is None or "constexpr" not in code_of(p.annotation.annotation)]
    const = [p for p in params if p not in plain]
    ordered = plain + const
    fixed = []
    for i, p in enumerate(ordered):
        p = p.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(ordered) - 1
                           else cst.MaybeSentinel.DEFAULT, default=None, equal=cst.MaybeSentinel.DEFAULT)
        fixed.append(p)
    return base.params.with_changes(params=fixed)


def _call_for(site_grid: cst.BaseExpression, kernel: str, params: list[cst.Param],
              binding: dict[str, cst.BaseExpression], options: dict[str, cst.BaseExpression]) -> cst.Call:
    plain = [p.name.value for p in params if p.annotation is None or "constexpr" not in code_of(p.annotation.annotation)]
    const = [p.name.value for p in params if p.name.value not in plain]
    args = [cst.Arg(binding[p]) for p in plain] + [make_arg(binding[p], p) for p in const]
    args += [make_arg(v, k) for k, v in options.items()]
    call = cst.Call(func=cst.Subscript(value=cst.Name(kernel), slice=[cst.SubscriptElement(cst.Index(site_grid))]),
                    args=[])
    return with_args(call, args)


def _rename_apart(fn: cst.FunctionDef, taken: set[str], keep: dict[str, str]) -> tuple[cst.FunctionDef, dict[str, str]]:
    """Rename every name of ``fn`` that clashes with ``taken`` (params and locals), except ``keep``
    which maps a name to a given new name."""
    mapping = dict(keep)
    names = set(param_names(fn)) | assigned_names(fn)   # module globals a kernel reads keep their names
    for n in sorted(names):
        if n in mapping:
            continue
        if n in taken:
            mapping[n] = _fresh(n, taken | names | set(mapping.values()))
        taken.add(mapping.get(n, n))
    mapping = {k: v for k, v in mapping.items() if k != v}
    new = rename(fn, mapping) if mapping else fn
    # parameter names too
    params = [p.with_changes(name=cst.Name(mapping.get(p.name.value, p.name.value))) for p in new.params.params]
    return new.with_changes(params=new.params.with_changes(params=params)), mapping


def _module_globals(module: cst.Module) -> set[str]:
    out = set()
    for s in module.body:
        if isinstance(s, cst.FunctionDef):
            out.add(s.name.value)
        out |= assigned_names(s) if isinstance(s, cst.SimpleStatementLine) else set()
    return out


def fuse_flat_flat(module: cst.Module, plan: Plan) -> cst.Module | None:
    kernels = jit_functions(module)
    k1, k2 = kernels[plan.producer.kernel], kernels[plan.consumer.kernel]
    f1, f2 = flat_kernel(k1), flat_kernel(k2)
    launch = function(module, plan.host)
    pr, co = plan.producer, plan.consumer

    def grid_code(site):
        if isinstance(site.grid, cst.Name):
            vals = [a[1] for st in launch.body.body if (a := single_assign(st)) and a[0] == site.grid.value]
            return code_of(vals[0]) if len(vals) == 1 else None
        return code_of(site.grid)

    if grid_code(pr) is None or grid_code(pr) != grid_code(co):
        return None
    for a, b in ((f1.block, f2.block), (f1.bound, f2.bound)):
        ea, eb = pr.bound.get(a), co.bound.get(b)
        if ea is None or eb is None or code_of(ea) != code_of(eb):
            return None
    p1, p2 = ptr_for(pr, plan.temp), ptr_for(co, plan.temp)
    # consumer renamed apart, with its prelude unified to the producer's
    taken = _kernel_names(k1) | _module_globals(module)
    keep = {f2.pid: f1.pid, f2.offs: f1.offs, f2.mask: f1.mask, f2.bound: f1.bound, f2.block: f1.block}
    k2r, mapping = _rename_apart(k2, set(taken), keep)
    f2r = flat_kernel(k2r)
    if f2r is None:
        return None
    p2r = mapping.get(p2, p2)
    tname = _fresh("_tdx_tmp", taken | _kernel_names(k2r))
    store = ptr_accesses(k1, p1)[1][0]
    load = ptr_accesses(k2r, p2r)[0][0]
    body1: list[cst.BaseStatement] = []
    f1_body_ids = {id(s) for s in f1.body}
    for st in k1.body.body:
        if id(st) in f1_body_ids and any(c is store for c in calls_named(st, "tl.store")):
            if not (isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Expr)):
                return None
            body1.append(cst.SimpleStatementLine([cst.Assign(targets=[cst.AssignTarget(cst.Name(tname))],
                                                             value=_stored_value(store, p1))]))
        else:
            body1.append(st)
    body2 = [_replace_load(st, load, cst.Name(tname), f1.mask) for st in f2r.body]
    params = [p for p in k1.params.params] + [p for p in k2r.params.params
                                              if p.name.value not in (f1.bound, f1.block, p2r)]
    name = f"{plan.producer.kernel}_{plan.consumer.kernel}_fused"
    fused = k1.with_changes(name=cst.Name(name), params=_build_signature(k1, params),
                            body=k1.body.with_changes(body=body1 + body2))
    binding = dict(pr.bound)
    inv = {v: k for k, v in mapping.items()}
    for p in k2r.params.params:
        n = p.name.value
        if n in binding or n == p2r:
            continue
        binding[n] = co.bound[inv.get(n, n)]
    options = {**pr.options, **co.options}
    call = _call_for(co.grid, name, [p for p in fused.params.params], binding, options)
    return _install(module, plan, fused, call, drop_kernels=set())


def _install(module: cst.Module, plan: Plan, fused: cst.FunctionDef, call: cst.Call,
             drop_kernels: set[str]) -> cst.Module:
    """Put the fused kernel after the producer's definition; replace the two launches by one."""
    launch = function(module, plan.host)
    body = []
    for i, st in enumerate(launch.body.body):
        if i == plan.producer.index:
            continue
        if i == plan.consumer.index:
            body.append(cst.SimpleStatementLine([cst.Expr(call)]))
            continue
        body.append(st)
    new_launch = launch.with_changes(body=launch.body.with_changes(body=body))
    out = []
    used = {s.kernel for _, s in host_launch_sites(module)} - {plan.producer.kernel, plan.consumer.kernel}
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == plan.host:
            out.append(new_launch)
            continue
        if isinstance(s, cst.FunctionDef) and s.name.value == plan.consumer.kernel:
            out.append(s) if s.name.value in used else None
            out.append(fused)
            continue
        if isinstance(s, cst.FunctionDef) and s.name.value == plan.producer.kernel and s.name.value not in used:
            continue
        out.append(s)
    return module.with_changes(body=out)


def fuse_epilogue(module: cst.Module, plan: Plan) -> cst.Module | None:
    """tile producer (matmul) -> flat consumer: the consumer runs on the tile."""
    kernels = jit_functions(module)
    launch = function(module, plan.host)
    pr, co = plan.producer, plan.consumer
    k1, k2 = kernels[pr.kernel], kernels[co.kernel]
    f2 = flat_kernel(k2)
    p1, p2 = ptr_for(pr, plan.temp), ptr_for(co, plan.temp)
    alloc = temp_alloc(launch, plan.temp)
    if not _is_2d_alloc(alloc) or not _numel_of(launch, co.bound.get(f2.bound), plan.temp, alloc):
        return None
    store = ptr_accesses(k1, p1)[1][0]
    tile = tile_offset(store.args[0].value, p1)
    mask1 = next((a.value for a in store.args if a.keyword and a.keyword.value == "mask"), None)
    if tile is None or mask1 is None:
        return None
    offset, s0, s1 = tile
    if not _stride_of(pr.bound.get(s0), plan.temp, 0) or (s1 and not _stride_of(pr.bound.get(s1), plan.temp, 1)):
        return None
    # the store must be a top-level statement of the producer (not in a loop or branch)
    si = next((i for i, st in enumerate(k1.body.body) if isinstance(st, cst.SimpleStatementLine)
               and any(c is store for c in calls_named(st, "tl.store"))), None)
    if si is None or not elementwise_only(f2.body):
        return None
    if f2.bound in set().union(*(names_in(s) for s in f2.body)):
        return None
    taken = _kernel_names(k1) | _module_globals(module)
    k2r, mapping = _rename_apart(k2, set(taken), {})
    f2r = flat_kernel(k2r)
    p2r = mapping.get(p2, p2)
    load = ptr_accesses(k2r, p2r)[0][0]
    tname = _fresh("_tdx_tile", taken | _kernel_names(k2r))
    pre = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(tname))], _stored_value(store, p1))]),
           cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(f2r.offs))], offset)]),
           cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(f2r.mask))], mask1)])]
    body2 = [_replace_load(st, load, cst.Name(tname), f2r.mask) for st in f2r.body]
    body = list(k1.body.body[:si]) + pre + body2 + list(k1.body.body[si + 1:])
    drop = {f2r.pid, f2r.offs, f2r.mask, f2r.bound, f2r.block, p2r}
    params = list(k1.params.params) + [p for p in k2r.params.params if p.name.value not in drop]
    name = f"{pr.kernel}_{co.kernel}_fused"
    fused = k1.with_changes(name=cst.Name(name), params=_build_signature(k1, params),
                            body=k1.body.with_changes(body=body))
    # the temporary is no longer written: its pointer stays only for its dtype
    binding = dict(pr.bound)
    inv = {v: k for k, v in mapping.items()}
    for p in params[len(k1.params.params):]:
        binding[p.name.value] = co.bound[inv.get(p.name.value, p.name.value)]
    call = _call_for(pr.grid, name, list(fused.params.params), binding, dict(pr.options))
    if not _args_available(launch, plan, binding):
        return None
    return _install(module, plan, fused, call, set())


def fuse_prologue(module: cst.Module, plan: Plan) -> cst.Module | None:
    """flat producer -> tile consumer: the producer's body runs on each tile the consumer loads."""
    kernels = jit_functions(module)
    launch = function(module, plan.host)
    pr, co = plan.producer, plan.consumer
    k1, k2 = kernels[pr.kernel], kernels[co.kernel]
    f1 = flat_kernel(k1)
    p1, p2 = ptr_for(pr, plan.temp), ptr_for(co, plan.temp)
    alloc = temp_alloc(launch, plan.temp)
    # (the producer's bound need not be T.numel(): the consumer only reads what the original producer
    # wrote, and the fused code computes exactly those positions)
    if not _is_2d_alloc(alloc):
        return None
    load = ptr_accesses(k2, p2)[0][0]
    tile = tile_offset(load.args[0].value, p2)
    mask2 = next((a.value for a in load.args if a.keyword and a.keyword.value == "mask"), None)
    if tile is None or mask2 is None:
        return None
    offset, s0, s1 = tile
    if not _stride_of(co.bound.get(s0), plan.temp, 0) or (s1 and not _stride_of(co.bound.get(s1), plan.temp, 1)):
        return None
    if not elementwise_only(f1.body):
        return None
    if f1.bound in set().union(*(names_in(s) for s in f1.body)):
        return None
    taken = _kernel_names(k2) | _module_globals(module)
    k1r, mapping = _rename_apart(k1, set(taken), {})
    f1r = flat_kernel(k1r)
    p1r = mapping.get(p1, p1)
    store = ptr_accesses(k1r, p1r)[1][0]
    tname = _fresh("_tdx_tile", taken | _kernel_names(k1r))
    pre = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(f1r.offs))], offset)]),
           cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(f1r.mask))], mask2)])]
    produced: list[cst.BaseStatement] = []
    for st in f1r.body:
        if any(c is store for c in calls_named(st, "tl.store")):
            produced.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(tname))],
                                                                _stored_value(store, p1r))]))
        else:
            produced.append(st)
    # insert before the statement holding the load (wherever it is, loops included)
    holder = [None]

    class Find(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            if any(c is load for c in calls_named(n, "tl.load")):
                holder[0] = n

    k2.visit(Find())
    if holder[0] is None:
        return None
    new_line = _replace_load(holder[0], load, cst.Name(tname), f1r.mask)
    k2n = replace_nodes(k2, {id(holder[0]): cst.FlattenSentinel(pre + produced + [new_line])})
    drop = {f1r.pid, f1r.offs, f1r.mask, f1r.bound, f1r.block}
    params = [p for p in k2n.params.params if p.name.value != p2] + \
             [p for p in k1r.params.params if p.name.value not in drop]
    name = f"{pr.kernel}_{co.kernel}_fused"
    fused = k2n.with_changes(name=cst.Name(name), params=_build_signature(k2n, params))
    binding = {k: v for k, v in co.bound.items() if k != p2}
    inv = {v: k for k, v in mapping.items()}
    for p in k1r.params.params:
        if p.name.value not in drop:
            binding[p.name.value] = pr.bound[inv.get(p.name.value, p.name.value)]
    call = _call_for(co.grid, name, list(fused.params.params), binding, dict(co.options))
    if not _args_available(launch, plan, binding):
        return None
    return _install(module, plan, fused, call, set())


def _args_available(launch: cst.FunctionDef, plan: Plan, binding: dict[str, cst.BaseExpression]) -> bool:
    """Nothing between the two launches reassigns a name the producer's call reads, or reads a tensor the
    producer writes (other than shape queries on the temporary, checked separately): the fused launch
    runs where the consumer's was."""
    between = launch.body.body[plan.producer.index + 1:plan.consumer.index]
    written = set().union(set(), *(assigned_names(s) for s in between))
    read_by_producer = set().union(set(), *(names_in(e) for e in plan.producer.bound.values()))
    if written & read_by_producer:
        return False
    outputs = {code_of(e) for p, e in plan.producer.bound.items() if isinstance(e, cst.Name)} - {plan.temp}
    touched = set().union(set(), *(names_in(s) for s in between))
    return not (outputs & touched & _stored_args(plan))


def _stored_args(plan: Plan) -> set[str]:
    """Launcher names passed to the producer for the pointers it stores to."""
    return set(plan.stored_args)
