"""Kernel launches chained through a temporary, fused into one kernel (the temporary never hits HBM).

Three shapes of chain are handled, all through a temporary ``T`` that launch() allocates itself
(``torch.empty``/``empty_like``), does not return, and that one kernel only stores and the next
only loads:

- flat -> flat: both kernels use the flat ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` /
  ``mask = offs < n`` indexing with the same grid, block and bound: the consumer's body is inlined
  after the producer's, the load of T replaced by the value the producer stored (cast to T's dtype,
  as the store did).
- tile -> flat (epilogue): a 2-D tile kernel (a matmul) stores T at ``A[:, None] * s0 + B[None, :] * s1``
  with (s0, s1) = T.stride() of a fresh contiguous 2-D T, and a flat elementwise kernel over
  ``T.numel()`` consumes it: the consumer's per-element body runs on the tile right after the
  product, with ``offs`` = the tile's flat index and its mask = the tile mask.
- flat -> tile (prologue): a flat elementwise producer writes T, and a tile kernel loads T tiles
  at ``A[:, None] * s0 + B[None, :] * s1``: the producer's body runs on each tile where the load was.

Preconditions are checked conservatively; anything else gives no proposal.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    LaunchSite,
    assigned_names,
    calls_named,
    code_of,
    constexpr_names,
    dotted,
    expr,
    function,
    jit_functions,
    launch_sites,
    make_arg,
    names_in,
    param_names,
    parse,
    rename,
    replace_nodes,
    unwrap_hints,
    with_args,
)

ELEMENTWISE = {
    "tl.load", "tl.store", "tl.where", "tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.erf", "tl.sigmoid", "tl.sqrt",
    "tl.sqrt_rn", "tl.rsqrt", "tl.abs", "tl.maximum", "tl.minimum", "tl.clamp", "tl.floor", "tl.ceil", "tl.cos",
    "tl.sin", "tl.fma", "tl.fdiv", "tl.div_rn", "tl.math.exp", "tl.math.exp2", "tl.math.log", "tl.math.erf",
    "tl.math.sqrt", "tl.math.rsqrt", "tl.math.abs", "float", "int", "tl.cast",
}


# ---------------------------------------------------------------------------------------------
# kernel shapes
# ---------------------------------------------------------------------------------------------

@dataclass
class Flat:
    fn: cst.FunctionDef
    pid: str
    offs: str
    mask: str
    bound: str          # the parameter offs is compared with
    block: str          # the constexpr
    body: list[cst.BaseStatement]   # statements after the prelude


def _assign(st: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign):
        a = st.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
    return None


def _is_pid_expr(e: cst.BaseExpression, pid: str | None) -> bool:
    if isinstance(e, cst.Name) and e.value == pid:
        return True
    if isinstance(e, cst.Call) and dotted(e.func) == "tl.program_id" and code_of(e.args[0].value) in ("0", "axis=0"):
        return True
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
        return _is_pid_expr(e.func.value, pid)
    return False


def flat_kernel(fn: cst.FunctionDef) -> Flat | None:
    """The flat prelude (pid, offs, mask) of a 1-D elementwise kernel, or None."""
    params = param_names(fn)
    constexprs = constexpr_names(fn)
    body = list(fn.body.body)
    pid = offs = mask = bound = block = None
    rest: list[cst.BaseStatement] = []
    for st in body:
        a = _assign(st)
        if a and pid is None and _is_pid_expr(a[1], None):
            pid = a[0]
            continue
        if a and pid and offs is None and isinstance(unwrap_hints(a[1]), cst.BinaryOperation) and \
                isinstance(unwrap_hints(a[1]).operator, cst.Add):
            l, r = unwrap_hints(a[1]).left, unwrap_hints(a[1]).right
            for prod, ar in ((l, r), (r, l)):
                if isinstance(prod, cst.BinaryOperation) and isinstance(prod.operator, cst.Multiply) and \
                        isinstance(ar, cst.Call) and dotted(ar.func) == "tl.arange" and len(ar.args) == 2 and \
                        code_of(ar.args[0].value) == "0" and isinstance(ar.args[1].value, cst.Name):
                    b = ar.args[1].value.value
                    if b in constexprs and _is_pid_expr(prod.left, pid) and \
                            isinstance(prod.right, cst.Name) and prod.right.value == b:
                        offs, block = a[0], b
            if offs:
                continue
        if a and offs and mask is None and isinstance(a[1], cst.Comparison) and len(a[1].comparisons) == 1:
            c = a[1]
            if isinstance(c.left, cst.Name) and c.left.value == offs and \
                    isinstance(c.comparisons[0].operator, cst.LessThan) and \
                    isinstance(c.comparisons[0].comparator, cst.Name) and c.comparisons[0].comparator.value in params:
                mask, bound = a[0], c.comparisons[0].comparator.value
                continue
        rest.append(st)
    if not (pid and offs and mask):
        return None
    # pid only feeds offs; nothing reassigns the prelude names; no control flow in the body
    used = set()
    for st in rest:
        used |= names_in(st)
        if not isinstance(st, cst.SimpleStatementLine):
            return None
    if pid in used or block in used or {pid, offs, mask} & set().union(set(), *(assigned_names(s) for s in rest)):
        return None
    return Flat(fn, pid, offs, mask, bound, block, rest)


def elementwise_only(stmts: list[cst.BaseStatement]) -> bool:
    """Only per-element operations (no reductions, no shape-making calls like tl.arange/tl.zeros)."""
    for st in stmts:
        class V(cst.CSTVisitor):
            ok = True

            def visit_Call(self, n: cst.Call) -> None:
                name = dotted(n.func)
                if isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
                    return
                if name not in ELEMENTWISE:
                    V.ok = False

        st.visit(V())
        if not V.ok:
            return False
    return True


def _ptr_accesses(fn: cst.FunctionDef, ptr: str) -> tuple[list[cst.Call], list[cst.Call], bool]:
    """(loads, stores) whose address uses ``ptr``, and whether ``ptr`` is used any other way."""
    loads: list[cst.Call] = []
    stores: list[cst.Call] = []
    for c in calls_named(fn, "tl.load"):
        if c.args and ptr in names_in(c.args[0].value):
            loads.append(c)
    for c in calls_named(fn, "tl.store") + calls_named(fn, "tl.atomic_add"):
        if c.args and ptr in names_in(c.args[0].value):
            stores.append(c)
    other = False
    counted = sum(1 for c in loads + stores)
    total = [0]

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == ptr:
                total[0] += 1

        def visit_Param(self, n: cst.Param) -> bool:
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == ptr and n.attr.value == "dtype":
                return False   # ptr.dtype.element_ty: a type, not an access
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    fn.body.visit(V())
    if total[0] != counted:
        other = True
    return loads, stores, other


def _tile_offset(addr: cst.BaseExpression, ptr: str) -> tuple[cst.BaseExpression, str, str | None] | None:
    """``ptr + A[:, None] * s0 + B[None, :] * s1`` -> (offset expression, s0, s1 or None for unit stride)."""
    terms: list[cst.BaseExpression] = []

    def flatten(e):
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and not e.lpar:
            flatten(e.left)
            flatten(e.right)
        else:
            terms.append(e)

    flatten(addr)
    if not terms or not (isinstance(terms[0], cst.Name) and terms[0].value == ptr) or len(terms) != 3:
        return None
    rows, cols = terms[1], terms[2]

    def split(t, want):
        """A[want] * s  or  A[want] -> (s or None)."""
        if isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            if _is_bcast(t.left, want) and isinstance(t.right, cst.Name):
                return True, t.right.value
            if _is_bcast(t.right, want) and isinstance(t.left, cst.Name):
                return True, t.left.value
            return False, None
        return _is_bcast(t, want), None

    ok_r, s0 = split(rows, (":", "None"))
    ok_c, s1 = split(cols, ("None", ":"))
    if not ok_r or not ok_c or s0 is None:
        return None
    offset = cst.BinaryOperation(left=rows, operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                                             whitespace_after=cst.SimpleWhitespace(" ")), right=cols)
    return offset, s0, s1


def _is_bcast(e: cst.BaseExpression, pattern: tuple[str, str]) -> bool:
    if not isinstance(e, cst.Subscript) or len(e.slice) != 2:
        return False
    for el, want in zip(e.slice, pattern):
        s = el.slice
        if want == ":" and not (isinstance(s, cst.Slice) and s.lower is None and s.upper is None):
            return False
        if want == "None" and not (isinstance(s, cst.Index) and code_of(s.value) == "None"):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# launcher checks
# ---------------------------------------------------------------------------------------------

def _alloc(launch: cst.FunctionDef, name: str) -> cst.Call | None:
    """The single ``name = torch.empty(...)/empty_like(...)`` allocation of a temporary."""
    found = []
    for st in launch.body.body:
        a = _assign(st)
        if a and a[0] == name:
            found.append(a[1])
    if len(found) != 1 or name in _assigned_elsewhere(launch, name):
        return None
    v = found[0]
    if isinstance(v, cst.Call) and dotted(v.func) in ("torch.empty", "torch.empty_like"):
        return v
    return None


def _assigned_elsewhere(launch: cst.FunctionDef, name: str) -> set[str]:
    n = 0
    for st in launch.body.body:
        if name in assigned_names(st):
            n += 1
    return {name} if n > 1 else set()


def _is_2d_alloc(call: cst.Call) -> bool:
    if dotted(call.func) == "torch.empty" and call.args and isinstance(call.args[0].value, cst.Tuple):
        return len(call.args[0].value.elements) == 2 and not any(a.keyword and a.keyword.value in ("memory_format",)
                                                                 for a in call.args)
    return False


SHAPE_USES = ("numel", "shape", "stride", "size", "dtype", "device", "dim")


def _temp_uses_ok(launch: cst.FunctionDef, temp: str, sites: list[LaunchSite]) -> bool:
    """T is used only by its allocation, the two launches, and shape queries; never returned."""
    call_ids = {id(s.call) for s in sites}
    bad = [False]

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> bool:
            if id(n) in call_ids:
                return False
            if dotted(n.func) in ("torch.empty_like", "torch.zeros_like") and n.args and \
                    isinstance(n.args[0].value, cst.Name) and n.args[0].value.value == temp:
                for a in n.args[1:]:
                    a.visit(self)
                return False
            return True

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == temp:
                if n.attr.value not in SHAPE_USES:
                    bad[0] = True
                return False
            return True

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            return False

        def visit_Name(self, n: cst.Name) -> None:
            if n.value == temp:
                bad[0] = True

    launch.body.visit(V())
    return not bad[0]


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


def _ptr_for(site: LaunchSite, temp: str) -> str | None:
    hits = [p for p, e in site.bound.items() if isinstance(e, cst.Name) and e.value == temp]
    return hits[0] if len(hits) == 1 else None


def _stride_of(e: cst.BaseExpression | None, temp: str, dim: int) -> bool:
    return e is not None and code_of(e).replace(" ", "") in (f"{temp}.stride({dim})", f"{temp}.stride(dim={dim})")


def _numel_of(launch: cst.FunctionDef, e: cst.BaseExpression | None, temp: str, alloc: cst.Call) -> bool:
    """``e`` is T.numel() (directly or through a local assigned once)."""
    if e is None:
        return False
    if isinstance(e, cst.Name):
        vals = [a[1] for st in launch.body.body if (a := _assign(st)) and a[0] == e.value]
        if len(vals) != 1:
            return False
        e = vals[0]
    c = code_of(e).replace(" ", "")
    return c in (f"{temp}.numel()",)


@dataclass
class Plan:
    kind: str
    producer: LaunchSite
    consumer: LaunchSite
    temp: str
    stored_args: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# building the fused kernel and launcher
# ---------------------------------------------------------------------------------------------

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


def plan_chains(module: cst.Module) -> list[Plan]:
    kernels = jit_functions(module)
    launch = function(module, "launch")
    if launch is None:
        return []
    sites = launch_sites(module)
    plans = []
    for i, prod in enumerate(sites):
        for cons in sites[i + 1:]:
            if not (prod.top_level and cons.top_level) or prod.kernel == cons.kernel:
                continue
            temps = {e.value for e in prod.bound.values() if isinstance(e, cst.Name)} & \
                    {e.value for e in cons.bound.values() if isinstance(e, cst.Name)}
            for temp in sorted(temps):
                alloc = _alloc(launch, temp)
                if alloc is None or not _temp_uses_ok(launch, temp, sites):
                    continue
                p1, p2 = _ptr_for(prod, temp), _ptr_for(cons, temp)
                if not p1 or not p2:
                    continue
                k1, k2 = kernels[prod.kernel], kernels[cons.kernel]
                l1, s1, o1 = _ptr_accesses(k1, p1)
                l2, s2, o2 = _ptr_accesses(k2, p2)
                if l1 or len(s1) != 1 or o1 or s2 or len(l2) != 1 or o2:
                    continue
                f1, f2 = flat_kernel(k1), flat_kernel(k2)
                if f1 and f2:
                    kind = "flat"
                elif f2 and not f1:
                    kind = "epilogue"
                elif f1 and not f2:
                    kind = "prologue"
                else:
                    continue
                stored = tuple(code_of(prod.bound[p]) for p in param_names(k1) if p in prod.bound and
                               isinstance(prod.bound[p], cst.Name) and _ptr_accesses(k1, p)[1])
                plans.append(Plan(kind, prod, cons, temp, stored))
    return plans


def _flat_flat(module: cst.Module, plan: Plan) -> cst.Module | None:
    kernels = jit_functions(module)
    k1, k2 = kernels[plan.producer.kernel], kernels[plan.consumer.kernel]
    f1, f2 = flat_kernel(k1), flat_kernel(k2)
    launch = function(module, "launch")
    pr, co = plan.producer, plan.consumer

    def grid_code(site):
        if isinstance(site.grid, cst.Name):
            vals = [a[1] for st in launch.body.body if (a := _assign(st)) and a[0] == site.grid.value]
            return code_of(vals[0]) if len(vals) == 1 else None
        return code_of(site.grid)

    if grid_code(pr) is None or grid_code(pr) != grid_code(co):
        return None
    for a, b in ((f1.block, f2.block), (f1.bound, f2.bound)):
        ea, eb = pr.bound.get(a), co.bound.get(b)
        if ea is None or eb is None or code_of(ea) != code_of(eb):
            return None
    p1, p2 = _ptr_for(pr, plan.temp), _ptr_for(co, plan.temp)
    # consumer renamed apart, with its prelude unified to the producer's
    taken = _kernel_names(k1) | _module_globals(module)
    keep = {f2.pid: f1.pid, f2.offs: f1.offs, f2.mask: f1.mask, f2.bound: f1.bound, f2.block: f1.block}
    k2r, mapping = _rename_apart(k2, set(taken), keep)
    f2r = flat_kernel(k2r)
    if f2r is None:
        return None
    p2r = mapping.get(p2, p2)
    tname = _fresh("_tdx_tmp", taken | _kernel_names(k2r))
    store = _ptr_accesses(k1, p1)[1][0]
    load = _ptr_accesses(k2r, p2r)[0][0]
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
    launch = function(module, "launch")
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
    used = {s.kernel for s in launch_sites(module)} - {plan.producer.kernel, plan.consumer.kernel}
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "launch":
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


def _epilogue(module: cst.Module, plan: Plan) -> cst.Module | None:
    """tile producer (matmul) -> flat consumer: the consumer runs on the tile."""
    kernels = jit_functions(module)
    launch = function(module, "launch")
    pr, co = plan.producer, plan.consumer
    k1, k2 = kernels[pr.kernel], kernels[co.kernel]
    f2 = flat_kernel(k2)
    p1, p2 = _ptr_for(pr, plan.temp), _ptr_for(co, plan.temp)
    alloc = _alloc(launch, plan.temp)
    if not _is_2d_alloc(alloc) or not _numel_of(launch, co.bound.get(f2.bound), plan.temp, alloc):
        return None
    store = _ptr_accesses(k1, p1)[1][0]
    tile = _tile_offset(store.args[0].value, p1)
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
    load = _ptr_accesses(k2r, p2r)[0][0]
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


def _prologue(module: cst.Module, plan: Plan) -> cst.Module | None:
    """flat producer -> tile consumer: the producer's body runs on each tile the consumer loads."""
    kernels = jit_functions(module)
    launch = function(module, "launch")
    pr, co = plan.producer, plan.consumer
    k1, k2 = kernels[pr.kernel], kernels[co.kernel]
    f1 = flat_kernel(k1)
    p1, p2 = _ptr_for(pr, plan.temp), _ptr_for(co, plan.temp)
    alloc = _alloc(launch, plan.temp)
    # (the producer's bound need not be T.numel(): the consumer only reads what the original producer
    # wrote, and the fused code computes exactly those positions)
    if not _is_2d_alloc(alloc):
        return None
    load = _ptr_accesses(k2, p2)[0][0]
    tile = _tile_offset(load.args[0].value, p2)
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
    store = _ptr_accesses(k1r, p1r)[1][0]
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


@rewrite("fuse_launches", "elementwise launches chained through a temporary fused into one kernel "
                          "(flat chains, matmul epilogues, elementwise prologues of a matmul); a loop of "
                          "per-tensor launches turned into one multi-tensor launch", priority=8)
def fuse_launches(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("fuse_launches")
    if not motivating:
        return []
    source = ctx.spec.source
    out: list[Proposal] = []
    for _ in range(4):   # a chain of several kernels fuses pairwise, one pair per step
        module = parse(source)
        done = False
        for plan in plan_chains(module):
            build = {"flat": _flat_flat, "epilogue": _epilogue, "prologue": _prologue}[plan.kind]
            try:
                new = build(module, plan)
            except (StopIteration, KeyError, IndexError, AttributeError):
                new = None
            if new is None:
                continue
            source = new.code
            out.append((plan.kind, plan.producer.kernel, plan.consumer.kernel, plan.temp))
            done = True
            break
        if not done:
            break
    multi = multi_tensor_proposals(ctx, [f.id for f in motivating])
    if not out or source == ctx.spec.source:
        return multi
    kinds = {k for k, *_ in out}
    what = "; ".join(f"{p} -> {c} through {t} ({k})" for k, p, c, t in out)
    pred = {"flat": "the temporary's write and read-back disappear: fewer HBM passes (e.g. 6 -> 4) and one launch",
            "epilogue": "the consumer runs on the accumulator tile: C is written once instead of written, read and "
                        "written again",
            "prologue": "the producer runs on each tile as it is loaded: the intermediate tensor is never written "
                        "or re-read (the loop does the extra element math)"}
    return [Proposal("fuse_launches", source, {"chains": [list(x) for x in out]}, f"fused: {what}",
                     [f.id for f in motivating], "; ".join(pred[k] for k in sorted(kinds)))] + multi


def multi_tensor_proposals(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    """A loop of per-tensor launches of one kernel -> one multi-tensor launch per group of tensors."""
    from tritondx.tools.rewrite.multi_tensor import MT_MAX, plan_multi_tensor
    out = []
    for source, kernel in plan_multi_tensor(ctx.spec.source):
        out.append(Proposal(
            "fuse_launches", source, {"multi_tensor": kernel, "max_items": MT_MAX},
            f"multi-tensor launch: the loop records each {kernel} launch and one {kernel}_mt launch runs up to "
            f"{MT_MAX} of them (per-tensor arguments as tuples, a program-offset table picks the tensor)",
            motivated_by,
            "one host launch and one GPU launch instead of one per tensor: the per-launch host cost (Python binding, "
            "~10-20 us each) and the tail of every small grid disappear; the bytes moved are unchanged"))
    return out
