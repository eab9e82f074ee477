"""A fixed launch configuration turned into ``@triton.autotune`` for tasks whose shapes vary (DYNAMIC).

The configurations come from the launch_config space (the current one first), the key from the
kernel's size parameters (those compared with an index, used as a loop bound or in tl.cdiv), and the
launcher stops passing the tuned constexprs and launch options; a grid that used the block size
becomes ``lambda META: (... META["BLOCK"] ...)``. A kernel whose block size the launcher also uses for
anything else (buffer sizes ...) is left alone.

A grid size the kernel never receives (the token count T in a ``(T, cdiv(N, BLOCK))`` grid) cannot be in
the key, so the autotuner would keep the configuration tuned for the first T for every later T. Such a
grid element is passed as an extra (unused) integer argument ``grid<axis>_bucket`` =
``triton.next_power_of_2(<element>)`` and keyed on: one tuning per power-of-two bucket of the varying
size, not one per distinct size and not one for all.

On a GPU the autotuner times the configurations once per key; under the interpreter it cannot time,
so ``single_config_variants`` gives one candidate per configuration for a correctness check of each.
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.alignment import _pure_host_expr
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    add_params,
    code_of,
    constexpr_names,
    dotted,
    expr,
    jit_functions,
    local_assignment,
    names_in,
    param_names,
    parse,
    remove_call_kwargs,
    subst,
)
from tritondx.tools.rewrite.launch_sites import function_launch_sites
from tritondx.tools.rewrite.launches import launching_functions
from tritondx.tools.rewrite.launch_config import (
    DEFAULT_OPTIONS,
    FLAT_SPACE,
    MATMUL_NAMES,
    MATMUL_SPACE,
    _matmul_params,
    current_options,
    prepare,
)

# (BLOCK_N, BLOCK_K, num_warps, num_stages) when the M tile is not tunable
NK_SPACE = [(128, 64, 4, 4), (64, 128, 4, 4), (128, 128, 8, 3), (256, 64, 8, 3)]
from tritondx.tools.rewrite.taskinfo import task_info


def size_params(fn: cst.FunctionDef) -> list[str]:
    """Non-constexpr, non-pointer parameters used as sizes: compared, a range bound, or in tl.cdiv."""
    consts = set(constexpr_names(fn))
    cands = [p for p in param_names(fn) if p not in consts and not p.endswith("ptr") and not p.startswith("stride")]
    used: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Comparison(self, n: cst.Comparison) -> None:
            for c in n.comparisons:
                used.update(names_in(c.comparator))
            used.update(names_in(n.left))

        def visit_Call(self, n: cst.Call) -> None:
            if dotted(n.func) in ("range", "tl.range", "tl.cdiv") and n.args:
                for a in n.args[:2]:
                    used.update(names_in(a.value))

    fn.visit(V())
    return [p for p in cands if p in used]


def _config_list(kernel: str, tunables: dict, options: dict) -> list[tuple[dict[str, int], int, int | None]]:
    """[(constexpr values, num_warps, num_stages or None)], the current configuration first."""
    cur_opts = options.get(kernel, dict(DEFAULT_OPTIONS))
    stages = cur_opts.get("num_stages", 3)
    current = ({p: t.value for p, t in tunables.items()}, max(cur_opts.get("num_warps", 4), 1),
               stages if stages > 0 and stages != DEFAULT_OPTIONS["num_stages"] else None)
    out = [current]
    mm = _matmul_params(list(tunables))
    n_k = {d: next((p for p in tunables if p in MATMUL_NAMES[d]), None) for d in ("N", "K")}
    if mm:
        for bm, bn, bk, w, s in MATMUL_SPACE:
            out.append(({mm["M"]: bm, mm["N"]: bn, mm["K"]: bk}, w, s))
    elif len(tunables) == 2 and all(n_k.values()):
        # M tile computed by the launcher (skinny shapes): tune the N/K tiles, warps and stages
        for bn, bk, w, s in NK_SPACE:
            out.append(({n_k["N"]: bn, n_k["K"]: bk}, w, s))
    elif len(tunables) == 1:
        (p, t), = tunables.items()
        for b, w in FLAT_SPACE:
            if t.role == "other" and b < t.value:
                continue
            out.append(({p: b}, w, None))
    seen, uniq = set(), []
    for c in out:
        key = (tuple(sorted(c[0].items())), c[1], c[2] or DEFAULT_OPTIONS["num_stages"])
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq[:6]


def _config_src(values: dict[str, int], warps: int, stages: int | None) -> str:
    kv = ", ".join(f'"{k}": {v}' for k, v in values.items())
    return f"triton.Config({{{kv}}}, num_warps={warps}" + (f", num_stages={stages})" if stages else ")")


def autotune_source(source: str) -> tuple[str, dict[str, dict]]:
    prepared, tunables = prepare(source)
    module, launchers = launching_functions(prepared)
    kernels = jit_functions(module)
    if not launchers or not tunables:
        return source, {}
    options = current_options(prepared)
    owner = {id(s.call): f for f in launchers for s in function_launch_sites(f, kernels)}
    sites = [s for f in launchers for s in function_launch_sites(f, kernels)]
    by_kernel: dict[str, dict] = {}
    for t in tunables:
        by_kernel.setdefault(t.kernel, {})[t.param] = t
    done: dict[str, dict] = {}
    new_fns: dict[str, cst.FunctionDef] = {}
    call_edits: dict[int, tuple[list[str], dict[str, str]]] = {}
    for kname, tun in by_kernel.items():
        fn = kernels[kname]
        if any("autotune" in code_of(d.decorator) for d in fn.decorators):
            continue
        ks = [s for s in sites if s.kernel == kname]
        fns = {id(owner[id(s.call)]) for s in ks}
        if len(fns) != 1:   # launched from several functions: their locals are not one set
            continue
        launch = owner[id(ks[0].call)]
        locals_: dict[str, str] = {}
        ok = True
        for s in ks:
            for p in tun:
                e = s.bound.get(p)
                if not isinstance(e, cst.Name):
                    ok = False
                    break
                if locals_.setdefault(p, e.value) != e.value:
                    ok = False
        if not ok or not ks:
            continue
        # the block locals may only feed this kernel's calls and grids
        grids = []
        for s in ks:
            if isinstance(s.grid, cst.Name):
                vals = local_assignment(launch, s.grid.value)
                if len(vals) != 1:
                    ok = False
                    break
                grids.append(vals[0])
            else:
                grids.append(s.grid)
        if not ok:
            continue
        # (only the tuned keywords themselves and the grids: a local also feeding, say, an EVEN flag or a
        # buffer size would no longer match the configuration the autotuner picks)
        tuned_args = [a for s in ks for a in s.call.args if a.keyword is not None and a.keyword.value in tun]
        other_uses = _uses_outside(launch, set(locals_.values()), tuned_args + grids)
        if other_uses:
            continue
        configs = _config_list(kname, tun, options)
        if len(configs) < 2:
            continue
        key = size_params(fn)
        buckets = _grid_buckets(fn, ks, grids, set(locals_.values()), key)
        key = key + [b for b in (buckets[0] if buckets else {})]
        deco = cst.Decorator(decorator=expr(
            "triton.autotune(configs=[" + ", ".join(_config_src(*c) for c in configs) + f"], key={key!r})"))
        new_fn = fn.with_changes(decorators=[deco] + list(fn.decorators))
        if buckets and buckets[0]:
            new_fn = add_params(new_fn, list(buckets[0]))
        new_fns[kname] = new_fn
        for i, (s, g) in enumerate(zip(ks, grids)):
            call_edits[id(s.call)] = (list(tun), {v: p for p, v in locals_.items()}, g,
                                      buckets[i] if buckets else {})
        done[kname] = {"configs": [_config_src(*c) for c in configs], "key": key}
    if not done:
        return source, {}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            edit = call_edits.get(id(original))
            if edit is None:
                return updated
            params, local_to_param, grid, bucket = edit
            call = remove_call_kwargs(updated, set(params) | {"num_warps", "num_stages"})
            if bucket:
                call = add_call_kwargs(call, {k: expr(f"triton.next_power_of_2({v})") for k, v in bucket.items()})
            if names_in(grid) & set(local_to_param):
                g = subst(grid, {loc: expr(f'META["{p}"]') for loc, p in local_to_param.items()})
                lam = expr(f"lambda META: {code_of(g)}")
                call = call.with_changes(func=call.func.with_changes(slice=[cst.SubscriptElement(cst.Index(lam))]))
            return call

    module = module.with_changes(body=[new_fns[s.name.value] if isinstance(s, cst.FunctionDef) and s.name.value in new_fns
                                       else s.visit(T()) if isinstance(s, (cst.FunctionDef, cst.ClassDef)) else s
                                       for s in module.body])
    return module.code, done


def _grid_buckets(fn: cst.FunctionDef, sites: list, grids: list, tuned_locals: set[str],
                  key: list[str]) -> list[dict[str, str]]:
    """Per launch site, {extra parameter: grid element source} for the grid sizes that reach the kernel by no
    argument (same parameters at every site); [] when there are none or a grid is not a plain tuple."""
    params = set(param_names(fn))
    out: list[dict[str, str]] = []
    for s, g in zip(sites, grids):
        if not isinstance(g, cst.Tuple):
            return []
        passed = {code_of(e) for e in s.bound.values()}
        b: dict[str, str] = {}
        for axis, el in enumerate(g.elements):
            v = el.value
            if names_in(v) & tuned_locals or isinstance(v, cst.Integer) or code_of(v) in passed:
                continue
            if not _pure_host_expr(v):
                return []
            name = f"grid{axis}_bucket"
            if name in params:
                return []
            b[name] = code_of(v)
        out.append(b)
    if not out or any(set(b) != set(out[0]) for b in out):
        return []
    return out


def _uses_outside(launch: cst.FunctionDef, names: set[str], allowed: list[cst.CSTNode]) -> bool:
    """``names`` read in launch() other than inside ``allowed`` nodes (and their own assignments)."""
    allowed_ids = {id(a) for a in allowed}
    bad = [False]

    class V(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            if id(node) in allowed_ids:
                return False
            if isinstance(node, cst.Assign) and any(names_in(t.target) & names for t in node.targets):
                return False
            if isinstance(node, cst.Name) and node.value in names:
                bad[0] = True
            return True

    launch.body.visit(V())
    return bad[0]


def single_config_variants(source: str) -> list[str]:
    """The autotuned source with each kernel reduced to its i-th configuration, for i = 0, 1, ...
    (an autotuner with one configuration runs it without timing: what the interpreter can check)."""
    module = parse(source)
    lists = {}
    for name, fn in jit_functions(module).items():
        for d in fn.decorators:
            if isinstance(d.decorator, cst.Call) and dotted(d.decorator.func) == "triton.autotune":
                cfg = next(a.value for a in d.decorator.args if a.keyword and a.keyword.value == "configs")
                lists[name] = list(cfg.elements)
    if not lists:
        return []
    n = max(len(v) for v in lists.values())
    out = []
    for i in range(n):
        class T(cst.CSTTransformer):
            def __init__(self, index: int):
                super().__init__()
                self.index = index

            def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
                if updated.keyword is not None and updated.keyword.value == "configs" and \
                        isinstance(updated.value, cst.List):
                    els = list(updated.value.elements)
                    keep = els[min(self.index, len(els) - 1)].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    return updated.with_changes(value=updated.value.with_changes(elements=[keep]))
                return updated

        out.append(module.visit(T(i)).code)
    return out


@rewrite("autotune", "fixed launch configuration -> @triton.autotune over the launch_config space, keyed on the "
                     "size arguments (tasks whose shapes vary)", priority=55)
def autotune(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("autotune")
    if not motivating or not task_info(ctx.original.source).dynamic:
        return []
    source, done = autotune_source(ctx.spec.source)
    if not done:
        return []
    desc = "; ".join(f"{k}: {len(v['configs'])} configs keyed on {v['key']}" for k, v in done.items())
    return [Proposal("autotune", source, {"kernels": done}, desc, [f.id for f in motivating],
                     "each shape bucket gets its best measured configuration (the varying sizes of a dynamic task "
                     "want different blocks/warps); the first call per key pays the tuning time, later calls none")]
