"""Tier 0: pattern triage on the task source (ast only; nothing runs, nothing compiles)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tritondx.tools.records.evidence import Finding, finding_id
from tritondx.tools.task.spec import TaskSpec
from tritondx.tools.evidence.inplace import dotted_name as _call_name
from tritondx.tools.evidence.triage_patterns import launch_path, source_patterns

KERNEL_CLASSES = ("matmul-like", "attention-like", "reduction", "scan", "gather/scatter", "elementwise", "other")


@dataclass
class Launch:
    kernel: str
    lineno: int
    keywords: dict[str, ast.expr]




def kernel_launches(launch_fn: ast.FunctionDef, kernel_names: set[str]) -> list[Launch]:
    """``kernel[grid](...)`` calls inside the launcher, in source order."""
    out = []
    for node in ast.walk(launch_fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            name = _call_name(node.func.value)
            if name in kernel_names:
                out.append(Launch(name, node.lineno, {k.arg: k.value for k in node.keywords if k.arg}))
    return sorted(out, key=lambda launch: launch.lineno)


def _loop_bound(lp: ast.For) -> str:
    return ast.unparse(lp.iter.args[1]) if len(lp.iter.args) > 1 else ast.unparse(lp.iter.args[0])


def _arm_paths(fn: ast.AST) -> dict[int, set[tuple[int, str]]]:
    """id(loop) -> the (if node, arm) pairs enclosing it: ``{(id(if), "body"), ...}``."""
    paths: dict[int, set[tuple[int, str]]] = {}

    def visit(node: ast.AST, path: frozenset) -> None:
        if isinstance(node, ast.For):
            paths[id(node)] = set(path)
        if isinstance(node, ast.If):
            visit(node.test, path)
            for s in node.body:
                visit(s, path | {(id(node), "body")})
            for s in node.orelse:
                visit(s, path | {(id(node), "orelse")})
            return
        for child in ast.iter_child_nodes(node):
            visit(child, path)

    visit(fn, frozenset())
    return paths


def _same_range_passes(fn: ast.FunctionDef, ranged: list[ast.For]) -> list[ast.For]:
    """The most loops over one range that can all run in one call: loops in the two arms of one ``if``
    (an EVEN fast path and its masked twin) exclude each other, so they are not two passes."""
    paths = _arm_paths(fn)

    def exclusive(a: ast.For, b: ast.For) -> bool:
        pa, pb = paths.get(id(a), set()), paths.get(id(b), set())
        return any((node, "orelse" if arm == "body" else "body") in pb for node, arm in pa)

    best: list[ast.For] = []
    for bound in {_loop_bound(lp) for lp in ranged}:
        same = [lp for lp in ranged if _loop_bound(lp) == bound]
        for first in same:   # greedy from each start: a large compatible group (groups are tiny)
            group = [first]
            for lp in same:
                if lp is not first and not any(exclusive(lp, g) for g in group):
                    group.append(lp)
            if len(group) > len(best):
                best = sorted(group, key=lambda n: n.lineno)
    return best


def _calls(fn: ast.AST) -> list[str]:
    return [_call_name(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)]


def classify(spec: TaskSpec, tree: ast.Module) -> str:
    kernels = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in {k.name for k in spec.kernels}}
    calls = [c for fn in kernels.values() for c in _calls(fn)]
    src = spec.source
    ref = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "reference"), None)
    ref_src = ast.unparse(ref) if ref else ""
    n_dots = calls.count("tl.dot")
    mul_sum = "[:, :, None]" in src and "tl.sum" in src
    if n_dots >= 2 or ("softmax" in ref_src and ("@" in ref_src or "matmul" in ref_src or "bmm" in ref_src)):
        return "attention-like"
    if n_dots or mul_sum or any(w in ref_src for w in ("@", "matmul", "mm(", "linear")):
        return "matmul-like"
    if any(c in calls for c in ("tl.cumsum", "tl.associative_scan", "tl.cumprod")):
        return "scan"
    if _has_indirect_access(kernels.values()):
        return "gather/scatter"
    if any(c in calls for c in ("tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin")):
        return "reduction"
    if any(c in calls for c in ("tl.load", "tl.store")):
        return "elementwise"
    return "other"


def _has_indirect_access(kernels) -> bool:
    """A load/store whose address uses a value that itself came from tl.load."""
    for fn in kernels:
        loaded: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    _call_name(node.value.func) == "tl.load":
                loaded.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _call_name(node.func) in ("tl.load", "tl.store", "tl.atomic_add"):
                if node.args and any(isinstance(n, ast.Name) and n.id in loaded for n in ast.walk(node.args[0])):
                    return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def index_arith_loads(fn: ast.FunctionDef) -> tuple[list[ast.Call], list[ast.Call]] | None:
    """The kernel's per-element (tl.arange-derived) loads when every one of them is a gather: its address
    goes through ``//`` or ``%`` of the offsets (an NCHW window, a broadcast column, a transposed index) or
    through indices loaded per element. Returns (div/mod loads, indirect loads), or None when the kernel has
    no per-element load or at least one plain ``base + offs`` load (contiguous elementwise traffic)."""
    assigns = [(t.id, n.value) for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               and n.value is not None
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]

    def closure(seed) -> set[str]:
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, value in assigns:
                if name not in out and seed(value, out):
                    out.add(name)
                    changed = True
        return out

    def has_arange(e: ast.AST, vec: set[str]) -> bool:
        return "tl.arange" in _calls(e) or bool(_names(e) & vec)

    vec = closure(has_arange)

    def divmod_of_vec(e: ast.AST, dm: set[str]) -> bool:
        return bool(_names(e) & dm) or any(isinstance(b, ast.BinOp) and isinstance(b.op, (ast.FloorDiv, ast.Mod))
                                           and has_arange(b, vec) for b in ast.walk(e))

    divmod_names = closure(divmod_of_vec)
    loads = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and _call_name(n.func) == "tl.load"]

    def address(call: ast.Call) -> ast.AST | None:
        return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)

    per_elem = [c for c in loads if address(c) is not None and has_arange(address(c), vec)]
    gathered = closure(lambda e, g: bool(_names(e) & g) or any(c in per_elem for c in ast.walk(e)))
    dm = [c for c in per_elem if divmod_of_vec(address(c), divmod_names)]
    ind = [c for c in per_elem if c not in dm and _names(address(c)) & gathered]
    if not per_elem or len(dm) + len(ind) < len(per_elem):
        return None
    return dm, ind


#: calls whose result is a block (a tensor of offsets or a block pointer), not one scalar
BLOCK_MAKERS = ("tl.arange", "tl.make_block_ptr", "tl.advance", "tl.make_tensor_descriptor", "tl.zeros", "tl.full")


def tensor_names(fn: ast.FunctionDef) -> set[str]:
    """Names that hold blocks: assigned (anywhere, loop-carried updates included) from an expression that
    makes a block or reads a name that holds one. ``a_ptrs = a_ptr + rm[:, None] * s + rk[None, :]`` outside
    a K-loop and ``a_ptrs += BLOCK_K`` inside it are both blocks."""
    return _derived_names(fn, lambda value: any(c in BLOCK_MAKERS for c in _calls(value)))


def tile_names(fn: ast.FunctionDef) -> set[str]:
    """Names that hold 2-D (or higher) blocks: built with a ``[:, None]`` / ``[None, :]`` broadcast or a block
    pointer, or read from a name that holds one."""
    return _derived_names(fn, _is_tile_expr)


def _is_tile_expr(e: ast.AST) -> bool:
    return any(isinstance(n, ast.Subscript) and "None" in ast.unparse(n.slice) for n in ast.walk(e)) or \
        any(c in ("tl.make_block_ptr", "tl.make_tensor_descriptor") for c in _calls(e))


def _derived_names(fn: ast.FunctionDef, seed) -> set[str]:
    pairs = [(t.id, n.value) for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and n.value is not None
             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             for t in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(t, ast.Name)]
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, value in pairs:
            if name not in out and (seed(value) or _names(value) & out):
                out.add(name)
                changed = True
    return out


def _is_block_value(load: ast.Call, block_names: set[str]) -> bool:
    """A tl.load whose pointer is a block (offsets from tl.arange, a block pointer), not one element."""
    ptr = load.args[0] if load.args else next((k.value for k in load.keywords if k.arg == "pointer"), None)
    if ptr is None:
        return False
    return any(c in BLOCK_MAKERS for c in _calls(ptr)) or bool(_names(ptr) & block_names)


def _row_loop_load(lp: ast.For, loads: list[ast.Call], block_names: set[str], tiles: set[str]) -> bool:
    """A step-1 loop whose every load is a 1-D block (no ``[:, None]`` broadcast, no block pointer) and one of
    whose addresses moves by ``index * stride`` with the loop index (directly or through a name assigned in the
    loop): one row of a 2-D array per iteration."""
    if not isinstance(lp.target, ast.Name) or len(lp.iter.args) == 3 or \
            any(_is_tile_expr(c) or _names(c) & tiles for c in loads):
        return False
    i = lp.target.id
    local = {t.id: n.value for n in ast.walk(lp) if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name)}

    def scaled(e: ast.AST, depth: int = 0) -> bool:
        if any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult) and i in _names(b) for b in ast.walk(e)):
            return True
        return depth < 3 and any(scaled(local[n], depth + 1) for n in _names(e) if n in local and n != i)

    return all(_is_block_value(c, block_names) for c in loads) and \
        any(scaled(c.args[0]) for c in loads if c.args)


def _int_value(expr: ast.expr, launch_fn: ast.FunctionDef) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ast.Name):
        for node in ast.walk(launch_fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id == expr.id and isinstance(node.value, ast.Constant):
                        return node.value.value if isinstance(node.value.value, int) else None
                    if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        for tt, vv in zip(t.elts, node.value.elts):
                            if isinstance(tt, ast.Name) and tt.id == expr.id and isinstance(vv, ast.Constant):
                                return vv.value if isinstance(vv.value, int) else None
    return None


def triage(spec: TaskSpec, launch_records: list | None = None) -> tuple[str, list[Finding]]:
    """Kernel class and findings from the source; with ``launch_records`` (the records of running ``launch()``,
    tools/tune/record.py), also the grid and work per program of each launch (triage_launches.py)."""
    tree = ast.parse(spec.source)
    lines = spec.source.splitlines()
    kclass = classify(spec, tree)
    findings: list[Finding] = []

    def add(detector: str, message: str, line: int | None, suggests: list[str], severity="medium", kernel=None,
            wants=None, **metric):
        findings.append(Finding(
            id=finding_id(detector, kernel, line), detector=detector, tier="triage", stage="source",
            kernel=kernel, severity=severity, message=message, source_line=line,
            source_text=lines[line - 1].strip() if line and line <= len(lines) else None,
            metric=metric, suggests=suggests, wants=wants or {}))

    add("kernel_class", f"classified as {kclass}", None, [], severity="info", kernel_class=kclass)
    launch_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch")
    names = {k.name for k in spec.kernels}
    # the launches of launch() and of the helpers it calls by name (real launchers wrap their kernels: every
    # third-party corpus task launches from a helper), each read in the function that makes it
    path = launch_path(tree)
    hosts = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in path and n.name not in names]
    made = sorted(((fn, lc) for fn in hosts for lc in kernel_launches(fn, names)), key=lambda p: p[1].lineno)
    launches = [lc for _, lc in made]
    if len(launches) > 1:
        by = "launch()" if all(fn is launch_fn for fn, _ in made) else "launch() and the functions it calls"
        add("multiple_launches", f"{by} make{'s' if by == 'launch()' else ''} {len(launches)} kernel launches "
                                 f"({', '.join(lc.kernel for lc in launches)}); intermediate results go through HBM",
            launches[0].lineno, ["fuse_passes", "fuse_launches"], severity="high", launches=len(launches))
    for loop in (n for fn in hosts for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))):
        inner = kernel_launches(loop, names)
        if inner:
            # a GEMM per item (grouped / MoE GEMMs): one persistent launch over every item's tiles is the fix
            gemm = any(isinstance(n, ast.Call) and _call_name(n.func) == "tl.dot"
                       for fn in tree.body if isinstance(fn, ast.FunctionDef) and fn.name in {lc.kernel for lc in inner}
                       for n in ast.walk(fn))
            host = next(fn.name for fn in hosts if any(n is loop for n in ast.walk(fn)))
            add("launch_in_loop", f"{host}() launches {', '.join(sorted({lc.kernel for lc in inner}))} inside a "
                                  "Python loop: one host launch (and one GPU grid) per iteration, each item's launch "
                                  "paying the per-launch overhead and small items leaving the GPU mostly idle",
                inner[0].lineno, ["fuse_launches", "persistent"] if gemm else ["fuse_launches"], severity="high",
                kernel=inner[0].kernel,
                launches_in_loop=len(inner))
            break
    for fn, lc in made:
        info = spec.kernel(lc.kernel)
        for p in info.constexpr_params if info else []:
            if p in lc.keywords and "BLOCK" in p.upper():
                v = _int_value(lc.keywords[p], fn)
                if v is not None and v <= 256 and kclass in ("elementwise", "reduction", "gather/scatter", "scan"):
                    add("tiny_block", f"{lc.kernel} launched with {p}={v}: each program touches only {v} elements",
                        lc.lineno, ["launch_config"], severity="high" if v <= 128 else "medium", kernel=lc.kernel,
                        wants={p: "larger"}, **{p: v})
                if v is not None and kclass == "matmul-like" and v < 64 and p.upper() in ("BLOCK_M", "BLOCK_N"):
                    add("small_matmul_tile", f"{lc.kernel} launched with {p}={v}: tiles below 64 rows cannot use "
                                             "Hopper warpgroup MMA", lc.lineno, ["launch_config", "tl_dot"],
                        severity="high", kernel=lc.kernel, wants={p: "larger"}, **{p: v})
        nw = _int_value(lc.keywords["num_warps"], fn) if "num_warps" in lc.keywords else None
        if nw is not None and nw < 4:
            add("few_warps", f"{lc.kernel} launched with num_warps={nw}", lc.lineno, ["launch_config"],
                kernel=lc.kernel, wants={"num_warps": "larger"}, num_warps=nw)
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names):
        loops = [n for n in ast.walk(fn) if isinstance(n, ast.For)]
        ranged = [lp for lp in loops if isinstance(lp.iter, ast.Call) and _call_name(lp.iter.func) in
                  ("range", "tl.range", "tl.static_range")]
        passes = _same_range_passes(fn, ranged)
        if len(passes) >= 2:
            bound = _loop_bound(passes[0])
            add("multi_pass_loops", f"{fn.name} walks the same range ({bound}) in {len(passes)} separate "
                                    "loops: the data is read from memory once per pass",
                passes[1].lineno, ["fuse_passes"], severity="high", kernel=fn.name, passes=len(passes))
        block_names = tensor_names(fn)
        for lp in ranged:
            loads = [n for n in ast.walk(lp) if isinstance(n, ast.Call) and _call_name(n.func) == "tl.load"]
            if loads and not any(_is_block_value(c, block_names) for c in loads):
                add("scalar_loop", f"{fn.name} loads one element per iteration in a Python-level loop "
                                   f"({len(loads)} scalar load{'s' if len(loads) > 1 else ''}, no block of offsets)",
                    lp.lineno, ["vectorize_scalar_loop"], severity="high", kernel=fn.name)
            elif loads and _row_loop_load(lp, loads, block_names, tile_names(fn)):
                add("row_loop", f"{fn.name} loads one 1-D row block per iteration of a loop over rows "
                                f"({lp.target.id if isinstance(lp.target, ast.Name) else 'the loop index'} scales a "
                                "stride): 2-D tiles would load several rows per step",
                    lp.lineno, ["vectorize_scalar_loop"], severity="medium", kernel=fn.name)
        gathers = index_arith_loads(fn) if kclass in ("elementwise", "gather/scatter") else None
        if gathers:
            dm, ind = gathers
            first = min(dm + ind, key=lambda c: c.lineno)
            add("index_arith_loads", f"every per-element load of {fn.name} is a gather ({len(dm)} through // or % of "
                                     f"the offsets, {len(ind)} through loaded indices): consecutive elements of a "
                                     "thread are not adjacent in memory, so more elements per thread do not widen "
                                     "its accesses (fewer per thread keep a warp's load contiguous)",
                first.lineno, ["launch_config"], severity="medium", kernel=fn.name, divmod_loads=len(dm),
                indirect_loads=len(ind))
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _call_name(node.func) == "tl.sum":
                txt = ast.unparse(node)
                if "[:, :, None]" in txt and "[None, :, :]" in txt:
                    add("mul_sum_dot", "matrix product written as broadcast multiply and tl.sum instead of tl.dot",
                        node.lineno, ["tl_dot"], severity="high", kernel=fn.name)
    for pt in source_patterns(tree):
        add(pt.detector, pt.message, pt.line, pt.suggests, severity=pt.severity, kernel=pt.kernel, **pt.metric)
    if launch_records:
        from tritondx.tools.evidence.triage_launches import launch_findings
        dtypes = next((ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == "DTYPES" for t in n.targets)), "")
        half = dtypes and all(w in ("float16", "bfloat16") for w in
                              [d.split(".")[-1] for d in dtypes.strip("[]() ").split(",") if d.strip()])
        findings.extend(launch_findings(launch_records, spec.source, elem_bytes=2 if half else 4))
    if "triton.autotune" not in spec.source and "autotune" not in spec.source:
        add("fixed_launch_config", "no autotuning: one hand-picked launch configuration", launch_fn.lineno,
            ["launch_config", "autotune"], severity="low")
    return kclass, findings
