"""Launch-configuration search: block sizes, num_warps, num_stages, bounded by the evidence.

Which block constexprs may change is decided per launch site: a block passed as a literal
(``BLOCK=1024``) is first hoisted into a launcher local, and the grid's ``triton.cdiv(n, 1024)``
made to use that local, so that block and grid always move together; a block that the grid uses
in any other way, or that is computed (``triton.next_power_of_2(N)``), is left alone. A block that
is neither a flat ``pid * BLOCK`` tile, a loop step nor a matmul tile is only ever enlarged (the
kernel may rely on it covering a whole row).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    code_of,
    constexpr_names,
    dotted,
    int_value,
    jit_functions,
    local_assignment,
    names_in,
    parse,
    replace_nodes,
    stmt,
)
from tritondx.tools.rewrite.launch_sites import (
    LaunchSite,
    function_launch_sites,
)
from tritondx.tools.rewrite.launch_values import SetLaunchValues
from tritondx.tools.rewrite.launch_edit import EditRefused, set_values
from tritondx.tools.rewrite.launch_records import DEFAULT_OPTIONS
from tritondx.tools.rewrite.launches import analyze, launching_functions
from tritondx.tools.rewrite.taskinfo import task_info

# Elementwise / row-loop kernels: elements per program and warps.
FLAT_SPACE = [(1024, 4), (2048, 4), (4096, 8), (2048, 8), (8192, 8), (512, 4)]
#: warps tried for a kernel whose blocks cannot move (8 first: row-resident reductions of >= 2K columns)
WARPS_SPACE = (8, 4, 16, 2)
#: most warps a downward candidate uses to bring a block to one element per thread
MAX_DOWN_WARPS = 16


def downward_space(block: int, warps: int) -> list[tuple[int, int]]:
    """Fewer elements per thread for a gather kernel (triage's index_arith_loads) launched with >= 2 per thread:
    the same block with one element per thread (more warps, at most MAX_DOWN_WARPS), then half the block.

    A thread's consecutive outputs of a gather are not adjacent in memory (MaxPool2d's stride-2 windows), so
    more of them per thread only spread a warp's load instruction over more lines and cost registers: on the
    H200 every larger block of l2_maxpool2d was slower (BLOCK=512 0.83x ... 8192 0.34x, 2026-11-30)."""
    if warps <= 0 or block < 64 or block // (32 * warps) < 2:
        return []
    out = []
    one = min(block // 32, MAX_DOWN_WARPS)
    if one > warps:
        out.append((block, one))
    half = block // 2
    out.append((half, max(1, min(warps, half // 32))))
    return out
# Matmul-like kernels: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
# The 128x256x64 / 8 warps / 3 stages tile is the first config of Triton's matmul tutorial on Hopper and was the
# best measured on the H200 for all three suite GEMMs it ran (2026-11-30); 4 stages of it (192 KB of fp16 operand
# buffers) and its 256x128 transpose are the next candidates. Configs whose operand buffers exceed the 227 KB of
# shared memory a program may use on sm_90 are skipped for the task's dtypes.
MATMUL_SPACE = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3),
                (128, 128, 64, 4, 4), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 4, 3)]
SM90_SMEM_PER_PROGRAM = 227 * 1024


def smem_ok(bm: int, bn: int, bk: int, stages: int, elem_bytes: int = 2) -> bool:
    """Pipelined operand buffers of a matmul tile (stages x (A tile + B tile)) fit one program's shared memory."""
    return stages * (bm * bk + bk * bn) * elem_bytes <= SM90_SMEM_PER_PROGRAM
# Attention-like kernels (two tl.dot per key block, BLOCK_M x BLOCK_N score tiles): (BLOCK_M, BLOCK_N, num_warps,
# num_stages), the Hopper fp16 candidates of Triton's fused-attention tutorial (BLOCK_M in {64, 128}, BLOCK_N in
# {64, 128}, 4 or 8 warps, 3 or 4 stages; 128x128 only with 8 warps, whose accumulator needs two warpgroups).
ATTN_SPACE = [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3), (128, 128, 8, 4), (64, 128, 4, 3)]
MATMUL_NAMES = {"M": ("BLOCK_M", "BLOCK_SIZE_M", "BM", "TILE_M", "TILE_SIZE_M"),
                "N": ("BLOCK_N", "BLOCK_SIZE_N", "BN", "TILE_N", "TILE_SIZE_N"),
                "K": ("BLOCK_K", "BLOCK_SIZE_K", "BK", "TILE_K", "TILE_SIZE_K")}


def _matmul_params(params: list[str]) -> dict[str, str] | None:
    found = {}
    for dim, names in MATMUL_NAMES.items():
        hit = next((p for p in params if p in names), None)
        if hit is None:
            return None
        found[dim] = hit
    return found


def _attention_params(kernel_src: str, params: list[str]) -> dict[str, str] | None:
    """BLOCK_M / BLOCK_N of an attention-like kernel (two or more tl.dot, an exp, no K tile)."""
    if _matmul_params(params) is not None or kernel_src.count("tl.dot(") < 2 or "tl.exp" not in kernel_src:
        return None
    m = next((p for p in params if p in MATMUL_NAMES["M"]), None)
    n = next((p for p in params if p in MATMUL_NAMES["N"]), None)
    return {"M": m, "N": n} if m and n else None


def block_role(kernel: cst.FunctionDef, param: str) -> str:
    """How a kernel uses a block constexpr: 'flat' (pid * B + arange), 'loop' (a range step), 'other'."""
    return _block_role(code_of(kernel), param)


@lru_cache(maxsize=1024)
def _block_role(kernel_src: str, param: str) -> str:
    fn = ast.parse(textwrap.dedent(kernel_src)).body[0]
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and ast.unparse(n.func) in ("range", "tl.range") and len(n.args) >= 3 and \
                any(isinstance(x, ast.Name) and x.id == param for x in ast.walk(n.args[2])):
            return "loop"
    pids = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and "tl.program_id" in ast.unparse(n.value)
            for t in n.targets if isinstance(t, ast.Name)}
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            names = {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
            if param in names and (names & pids or "tl.program_id" in ast.unparse(n)):
                return "flat"
    return "other"


@dataclass
class Tunable:
    kernel: str
    param: str
    value: int
    role: str


def _grid_expr(launch: cst.FunctionDef, site: LaunchSite, sites: list[LaunchSite]) -> tuple[cst.BaseExpression, bool]:
    """The grid expression of a site (through a local ``grid = ...``) and whether it is shared."""
    if isinstance(site.grid, cst.Name):
        vals = local_assignment(launch, site.grid.value)
        if len(vals) == 1:
            shared = sum(1 for s in sites if isinstance(s.grid, cst.Name) and s.grid.value == site.grid.value) > 1
            return vals[0], shared
    return site.grid, False


def _literal_hits(node: cst.CSTNode, value: int) -> tuple[list[cst.Integer], bool]:
    """Integer nodes equal to ``value`` that are a cdiv divisor, and whether any other occurrence exists."""
    good: list[cst.Integer] = []
    bad = [False]

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> bool:
            if dotted(n.func) in ("triton.cdiv", "cdiv") and len(n.args) == 2 and int_value(n.args[1].value) == value:
                good.append(n.args[1].value)
                n.args[0].value.visit(self)
                return False
            return True

        def visit_Integer(self, n: cst.Integer) -> None:
            if int_value(n) == value:
                bad[0] = True

    node.visit(V())
    return good, bad[0]


def _hoist(launch: cst.FunctionDef, kernels: dict[str, cst.FunctionDef]) -> cst.FunctionDef | None:
    """``launch`` (any launching function) with its literal block keywords hoisted into locals that the
    grid's cdiv divisors of the same value use too; None when nothing is hoisted."""
    sites = function_launch_sites(launch, kernels)
    launch_names = names_in(launch)
    replacements: dict[int, cst.CSTNode] = {}
    inserts: dict[int, list[cst.BaseStatement]] = {}
    used_names = set(launch_names)
    # every literal in the function, and those that are block keywords or their grid's cdiv divisors: a block
    # literal whose value also appears anywhere else (an EVEN flag, a tile count, a buffer size ...) may be
    # tied to it, so it is not tuned
    literals: dict[int, list[int]] = {}

    class Lits(cst.CSTVisitor):
        def visit_Integer(self, n: cst.Integer) -> None:
            literals.setdefault(int_value(n), []).append(id(n))

    launch.visit(Lits())
    accounted: set[int] = set()
    for site in sites:
        g, _ = _grid_expr(launch, site, sites)
        for p in constexpr_names(kernels[site.kernel]):
            a = site.bound.get(p)
            if "BLOCK" in p.upper() and isinstance(a, cst.Integer):
                accounted.add(id(a))
                if g is not None:
                    accounted.update(id(x) for x in _literal_hits(g, int_value(a))[0])
    for site in sites:
        kfn = kernels[site.kernel]
        for p in constexpr_names(kfn):
            if "BLOCK" not in p.upper() or p not in site.bound:
                continue
            arg = site.bound[p]
            grid, shared = _grid_expr(launch, site, sites)
            if grid is None:
                continue
            if isinstance(arg, cst.Integer):
                v = int_value(arg)
                good, bad = _literal_hits(grid, v)
                if bad or (good and shared) or any(i not in accounted for i in literals.get(v, [])):
                    continue
                name = p if p not in used_names else next(f"{p}_{i}" for i in range(2, 99) if f"{p}_{i}" not in used_names)
                used_names.add(name)
                replacements[id(arg)] = cst.Name(name)
                for g in good:
                    replacements[id(g)] = cst.Name(name)
                inserts.setdefault(site.index, []).append(stmt(f"{name} = {v}"))
            elif isinstance(arg, cst.Name):
                vals = local_assignment(launch, arg.value)
                if len(vals) != 1 or int_value(vals[0]) is None:
                    continue
                good, bad = _literal_hits(grid, int_value(vals[0]))
                if bad:
                    continue
                for g in good:
                    replacements[id(g)] = cst.Name(arg.value)
    if not replacements and not inserts:
        return None
    new_launch = replace_nodes(launch, replacements)
    body = []
    for i, st in enumerate(new_launch.body.body):
        body.extend(inserts.get(i, []))
        body.append(st)
    return new_launch.with_changes(body=new_launch.body.with_changes(body=body))


def _hoisted(source: str) -> str:
    """Literal blocks hoisted in every function that launches a kernel reachable from launch()."""
    done: set[str] = set()
    for _ in range(16):
        module, fns = launching_functions(source)
        kernels = jit_functions(module)
        for fn in fns:
            key = fn.name.value
            if key in done:
                continue
            done.add(key)
            new = _hoist(fn, kernels)
            if new is not None:
                source = replace_nodes(module, {id(fn): new}).code
                break
        else:
            return source
    return source


#: constexpr names a block or tile goes by
def _is_block(p: str) -> bool:
    return "BLOCK" in p.upper() or p.upper().startswith("TILE")


@lru_cache(maxsize=64)
def prepare(source: str) -> tuple[str, list[Tunable]]:
    """Hoist literal block constexprs into locals tied to the grid (in whichever function launches the kernel);
    list the blocks that may be tuned: each defined by an int the rewrite can set where it stands (a call
    literal, a local, a signature default, a module constant, a dict entry, a helper's return, an autotune
    config), with no other literal of its value in its grid."""
    prepared = _hoisted(source)
    analysis = analyze(prepared)
    module, _ = launching_functions(prepared)
    kernels = jit_functions(module)
    dynamic = task_info(source).dynamic
    tunables: dict[tuple[str, str], Tunable] = {}
    refused: set[tuple[str, str]] = set()
    for site in analysis.sites:
        kfn = kernels.get(site.kernel)
        if kfn is None or site.grid is None:
            continue
        for p, d in site.params.items():
            if not _is_block(p) or p in SetLaunchValues.OPTIONS:
                continue
            key = (site.kernel, p)
            if d.kind == "autotune_config" and d.editable and d.values and not dynamic:
                value = min(d.values)
            elif d.editable and d.kind not in ("autotune_config", "literal") and d.value is not None:
                # (a call literal left after hoisting is tied to something else: not tuned)
                value = d.value
                if _grid_has_literal(site.grid.source, value):
                    refused.add(key)
            else:
                refused.add(key)
                continue
            old = tunables.get(key)
            if old is not None and old.value != value:
                refused.add(key)
            tunables[key] = Tunable(site.kernel, p, value, block_role(kfn, p))
    return prepared, [t for k, t in tunables.items() if k not in refused]


def _grid_has_literal(grid_src: str, value: int) -> bool:
    """An int literal equal to ``value`` in the grid (a hidden tie to the block); True when unreadable."""
    try:
        g = cst.parse_module(textwrap.dedent(grid_src)) if grid_src.lstrip().startswith("def ") else \
            cst.parse_expression(grid_src)
    except cst.ParserSyntaxError:
        return True
    return any(int_value(n) == value for n in _integers(g))


def _integers(node: cst.CSTNode) -> list[cst.Integer]:
    out: list[cst.Integer] = []

    class V(cst.CSTVisitor):
        def visit_Integer(self, n: cst.Integer) -> None:
            out.append(n)

    node.visit(V())
    return out


def current_options(source: str) -> dict[str, dict[str, int]]:
    """num_warps / num_stages per kernel as launched (a static value, the first autotune config's, or
    Triton's default); -1 where computed (left alone)."""
    out: dict[str, dict[str, int]] = {}
    for site in analyze(source).sites:
        vals = dict(DEFAULT_OPTIONS)
        for opt in SetLaunchValues.OPTIONS:
            d = site.params.get(opt)
            if d is None or d.kind == "unset":
                continue
            if d.kind == "autotune_config":
                vals[opt] = site.autotune_configs[0].get(opt, DEFAULT_OPTIONS[opt]) if site.autotune_configs else -1
            elif d.value is not None and d.kind != "computed":
                vals[opt] = d.value
            else:
                vals[opt] = -1   # computed: leave it
        out[site.kernel] = vals
    return out


def config_space(ctx: RewriteContext, source: str | None = None) -> list[tuple[str, dict[str, dict[str, int]]]]:
    """(description, {kernel: {param: value}}) candidates on the prepared source, current config excluded."""
    source = source if source is not None else ctx.spec.source
    prepared, tunables = prepare(source)
    options = current_options(prepared)
    by_kernel: dict[str, dict[str, Tunable]] = {}
    for t in tunables:
        by_kernel.setdefault(t.kernel, {})[t.param] = t
    warps_only = _warps_only(prepared, set(by_kernel), options)
    if not tunables and not warps_only:
        return []
    motivating = ctx.motivating("launch_config")
    spills = any(f.detector == "register_spills" for f in motivating)
    small_grid = any(f.detector in ("grid_too_small",) for f in motivating)
    elem = 4 if any(d in ("float32", "torch.float32") for d in ctx.dtypes) else 2
    space_mm = [c for c in MATMUL_SPACE if smem_ok(c[0], c[1], c[2], c[4], elem)]
    if spills or small_grid:   # smaller tiles first: fewer registers per thread, more programs
        space_mm = sorted(space_mm, key=lambda c: (c[0] * c[1], -c[4]))
    space_flat = sorted(FLAT_SPACE, key=lambda c: c[0]) if (spills or small_grid) else FLAT_SPACE
    kernels = jit_functions(parse(prepared))
    autotuned = {s.kernel for s in analyze(prepared).sites if s.autotuned}
    # gather kernels (every per-element load through // or % of the offsets, or loaded indices): fewer
    # elements per thread first, then the usual larger blocks
    gathers = {f.kernel for f in motivating if f.detector == "index_arith_loads"}
    flat_spaces: dict[str, list[tuple[int, int]]] = {}
    for kname, params in by_kernel.items():
        space = space_flat
        if kname in gathers and len(params) == 1:
            t = next(iter(params.values()))
            down = downward_space(t.value, options.get(kname, DEFAULT_OPTIONS).get("num_warps", 4)) \
                if t.role == "flat" else []
            space = down + [c for c in space_flat if c not in down]
        flat_spaces[kname] = space
    out = []
    n_flat = max([len(space_flat)] + [len(s) for s in flat_spaces.values()]) if by_kernel else max(
        len(s) for s in warps_only.values())
    for i in range(max(len(space_mm), n_flat, len(ATTN_SPACE)) if by_kernel else n_flat):
        values: dict[str, dict[str, int]] = {}
        for kname, params in by_kernel.items():
            mm = _matmul_params(list(params))
            att = _attention_params(code_of(kernels[kname]), list(params)) if kname in kernels else None
            opts = options.get(kname, dict(DEFAULT_OPTIONS))
            if att:
                if i >= len(ATTN_SPACE):
                    continue
                bm, bn, w, s = ATTN_SPACE[i]
                v = {att["M"]: bm, att["N"]: bn}
                if opts.get("num_warps", 4) >= 0:
                    v["num_warps"] = w
                if opts.get("num_stages", 3) >= 0:
                    v["num_stages"] = s
                values[kname] = v
            elif mm and i < len(space_mm):
                bm, bn, bk, w, s = space_mm[i]
                v = {mm["M"]: bm, mm["N"]: bn, mm["K"]: bk}
                if opts.get("num_warps", 4) >= 0:
                    v["num_warps"] = w
                if opts.get("num_stages", 3) >= 0:
                    v["num_stages"] = s
                values[kname] = v
            elif not mm and i < len(flat_spaces[kname]):
                blocks = list(params)
                if len(blocks) != 1:
                    continue
                t = params[blocks[0]]
                b, w = flat_spaces[kname][i]
                if t.role == "other" and b < t.value:
                    continue
                v = {t.param: b}
                if opts.get("num_warps", 4) >= 0:
                    v["num_warps"] = w
                values[kname] = v
        for kname, space in warps_only.items():
            if i < len(space):
                values[kname] = {"num_warps": space[i]}
        changed = {}
        for k, v in values.items():
            cur = {**options.get(k, DEFAULT_OPTIONS), **{p: t.value for p, t in by_kernel.get(k, {}).items()}}
            if any(cur.get(p) != x for p, x in v.items()) or k in autotuned:
                changed[k] = v
        if not changed:
            continue
        desc = "; ".join(f"{k}: " + ", ".join(f"{p}={x}" for p, x in v.items()) for k, v in changed.items())
        out.append((desc, changed))
    return out


def _warps_only(prepared: str, tuned: set[str], options: dict[str, dict[str, int]]) -> dict[str, list[int]]:
    """Kernels whose blocks cannot move (computed from the sizes, or set by heuristics) but whose num_warps can:
    WARPS_SPACE without the current value. The warps are written at the call where the launcher computes them
    (a ``calculate_settings``-style helper), since num_warps changes no result."""
    out: dict[str, list[int]] = {}
    for site in analyze(prepared).sites:
        if site.kernel in tuned or site.autotuned or site.kernel in out:
            continue
        # a static block left out of the tunables is tied to something the rewrite cannot follow: not this case
        if any(_is_block(p) and d.kind not in ("computed", "heuristic") for p, d in site.params.items()):
            continue
        cur = options.get(site.kernel, DEFAULT_OPTIONS).get("num_warps", 4)
        out[site.kernel] = [w for w in WARPS_SPACE if w != cur]
    return out


def apply_config(source: str, values: dict[str, dict[str, int]]) -> str:
    """The prepared source with ``values`` written where each launch value is defined; ``source`` unchanged
    when they cannot be (a definition shared with a launch that keeps its value and read elsewhere ...)."""
    prepared, _ = prepare(source)
    try:
        return set_values(prepared, values)
    except EditRefused:
        return source


@rewrite("launch_config", "search block sizes, num_warps and num_stages within the evidence's bounds", priority=50)
def launch_config(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("launch_config")
    if not motivating:
        return []
    gathers = {f.kernel for f in motivating if f.detector == "index_arith_loads"}
    proposals: list[Proposal] = []
    for desc, values in config_space(ctx):
        source = apply_config(ctx.spec.source, values)
        if source == ctx.spec.source:
            continue
        mm = any(_matmul_params(list(v)) or "BLOCK_M" in v for v in values.values())
        down = [k for k, v in values.items() if k in gathers and _fewer_per_thread(ctx.spec.source, k, v)]
        proposals.append(Proposal(
            family="launch_config", source=source, params=values, description=desc,
            motivated_by=[f.id for f in motivating],
            prediction=("larger tiles with more warps/stages: more reuse per loaded byte and Hopper wgmma "
                        "(M >= 64 per warpgroup)" if mm else
                        "fewer elements per thread of a gather kernel: each warp load instruction covers adjacent "
                        "outputs' windows (fewer lines per instruction, fewer registers, more warps in flight)"
                        if down else
                        "more elements per program and enough warps to keep loads in flight; for memory-bound "
                        "kernels toward the copy bandwidth (little where the kernel is already there)")))
    return proposals


def _fewer_per_thread(source: str, kernel: str, values: dict[str, int]) -> bool:
    """Whether a candidate gives ``kernel`` fewer elements per thread than the current launch."""
    prepared, tunables = prepare(source)
    blocks = [t for t in tunables if t.kernel == kernel]
    if len(blocks) != 1:
        return False
    t = blocks[0]
    w0 = current_options(prepared).get(kernel, DEFAULT_OPTIONS).get("num_warps", 4)
    b, w = values.get(t.param, t.value), values.get("num_warps", w0)
    return w0 > 0 and b * w0 < t.value * w
