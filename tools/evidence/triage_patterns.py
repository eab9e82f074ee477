"""Tier 0 source patterns that real kernels leave on the table (ast only; nothing runs, nothing compiles).

Each check returns ``(detector, message, line, suggests, severity, kernel, metric)`` tuples that
``triage()`` turns into findings; the source line quoted is the evidence:

- ``pow_constant_exponent``: ``libdevice.pow(x, 2)`` in a kernel (a product does it exactly) -> cheap_math
- ``fixed_program_count``: a grid-stride kernel (``range(pid, n, tl.num_programs(0))``) launched on a literal
  number of programs (a core count of some other device), or on ``min(..., C)`` programs -> grid_to_cores,
  grid_per_item
- ``causal_mask_every_tile``: a ``rows[:, None] >= cols[None, :]`` mask built from the loop index on every
  iteration of a loop over key tiles -> causal_split
- ``tiny_autotune_space``: ``@triton.autotune`` with one or two distinct configs -> autotune_widen
- ``flat_index_2d``: a flat index split by ``//`` and ``%`` into a row and a column, the column scaled in an
  access's address (a naive transpose) -> flat_tiles
- ``wrapper_copy``: the launcher copies an input into a new layout (``.permute(...).contiguous()``) before
  passing it, with its strides, to a kernel -> strided_args
- ``abs_reduce_two_pass``: ``x.abs().max()`` in host code (a temporary written and read back) -> absmax_norm
- ``clone_then_inplace``: ``launch`` copies a tensor (``x = x.clone()``) that a kernel then reads and writes in
  place (``tools/evidence/inplace.py``) -> clone_fold
- ``interleaved_pair``: two accesses ``p`` and ``p + 1`` where ``p``'s address walks ``tl.arange(0, H) * 2`` (a
  complex number's parts, a rope's even/odd halves read as two tensors) -> deinterleave
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tritondx.tools.evidence.inplace import dotted_name as _name
from tritondx.tools.evidence.inplace import fold_plan



#: spellings of the libdevice pow across Triton versions (tl.math.pow in 2.x, libdevice in 3.x)
POW_NAMES = ("tl.extra.cuda.libdevice.pow", "libdevice.pow", "tl.math.pow", "triton.language.extra.cuda.libdevice.pow",
             "tl.extra.libdevice.pow")
#: integral exponents whose product form is the same function as pow (see tools/rewrite/cheap_math.py)
EXACT_EXPONENTS = (1, 2, 3, 4)


def is_pow(name: str) -> bool:
    return name in POW_NAMES or name.endswith("libdevice.pow")


def constant_exponent(call: ast.Call) -> int | None:
    """The exponent of a pow call when it is an integral literal with an exact product form."""
    if len(call.args) != 2 or call.keywords:
        return None
    e = call.args[1]
    v = e.value if isinstance(e, ast.Constant) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or float(v) != int(v):
        return None
    return int(v) if int(v) in EXACT_EXPONENTS else None


@dataclass
class Pattern:
    detector: str
    message: str
    line: int | None
    suggests: list[str]
    severity: str = "medium"
    kernel: str | None = None
    metric: dict = field(default_factory=dict)


def _jit(fn: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and _jit(n)]


def _hosts(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and not _jit(n)]


def _launches(host: ast.FunctionDef, kernels: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(host) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
            and _name(n.func.value) in kernels]


def pow_patterns(tree: ast.Module) -> list[Pattern]:
    out = []
    for fn in _kernels(tree):
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and is_pow(_name(n.func)) and constant_exponent(n) is not None:
                e = constant_exponent(n)
                out.append(Pattern("pow_constant_exponent",
                                   f"{fn.name} calls {_name(n.func)}(x, {e}): a general powf (log/exp path) where "
                                   f"{'x' if e == 1 else ' * '.join(['x'] * e)} is exact", n.lineno, ["cheap_math"],
                                   "medium", fn.name, {"exponent": e}))
    return out


def grid_stride_loop(fn: ast.FunctionDef) -> tuple[int, str] | None:
    """(axis, step) of ``for i in range(tl.program_id(a) [+...], n, step)`` where step is tl.num_programs(a)
    or a parameter: the kernel walks its work with a stride of the program count."""
    params = {a.arg for a in fn.args.args}
    pids = {t.id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name) and isinstance(n.value, ast.Call) and _name(n.value.func) == "tl.program_id"}
    for lp in (n for n in ast.walk(fn) if isinstance(n, ast.For)):
        it = lp.iter
        if not (isinstance(it, ast.Call) and _name(it.func) in ("range", "tl.range") and len(it.args) == 3):
            continue
        start, step = it.args[0], it.args[2]
        start_pid = start if isinstance(start, ast.Call) else pids.get(start.id) if isinstance(start, ast.Name) else None
        if not (isinstance(start_pid, ast.Call) and _name(start_pid.func) == "tl.program_id"):
            continue
        axis = start_pid.args[0].value if start_pid.args and isinstance(start_pid.args[0], ast.Constant) else 0
        if isinstance(step, ast.Call) and _name(step.func) == "tl.num_programs" or \
                isinstance(step, ast.Name) and step.id in params:
            return axis, ast.unparse(step)
    return None


def int_constant(e: ast.expr, host: ast.FunctionDef, tree: ast.Module) -> int | None:
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.Name):
        for scope in (host, tree):
            vals = [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Name) and n.targets[0].id == e.id]
            if len(vals) == 1:
                return int_constant(vals[0], host, tree) if vals[0] is not e else None
            if vals:
                return None
    return None


def capped_count(e: ast.expr, host: ast.FunctionDef, tree: ast.Module) -> int | None:
    """C for a grid element ``min(<anything>, C)`` (either order) with C an integer constant: a program count
    capped at a number chosen for some device."""
    if isinstance(e, ast.Name):   # a name assigned once in the host function
        vals = [n.value for n in ast.walk(host) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == e.id]
        e = vals[0] if len(vals) == 1 else e
    if isinstance(e, ast.Call) and _name(e.func) == "min" and len(e.args) == 2 and not e.keywords:
        vals = [int_constant(a, host, tree) for a in e.args]
        known = [v for v in vals if v is not None]
        if len(known) == 1 and known[0] > 0:
            return known[0]
    return None


def grid_element(host: ast.FunctionDef, call: ast.Call, axis: int) -> ast.expr | None:
    grid = call.func.slice
    if isinstance(grid, ast.Name):
        vals = [n.value for n in ast.walk(host) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == grid.id]
        grid = vals[0] if len(vals) == 1 else None
    if isinstance(grid, ast.Lambda):
        grid = grid.body
    if isinstance(grid, ast.Tuple) and axis < len(grid.elts):
        return grid.elts[axis]
    return None


def program_count_patterns(tree: ast.Module, sm_count: int = 132) -> list[Pattern]:
    kernels = {k.name: k for k in _kernels(tree)}
    out = []
    for host in _hosts(tree):
        for call in _launches(host, set(kernels)):
            fn = kernels[_name(call.func.value)]
            loop = grid_stride_loop(fn)
            if loop is None:
                continue
            e = grid_element(host, call, loop[0])
            n = int_constant(e, host, tree) if e is not None else None
            capped = n is None and e is not None and capped_count(e, host, tree)
            if capped:
                n = capped
            if n is None:
                continue
            how = f"on at most {n} programs (min(..., {n}))" if capped else f"on a fixed {n} programs"
            out.append(Pattern("fixed_program_count",
                               f"{fn.name} walks its work with a stride of the program count ({loop[1]}) but is "
                               f"launched {how} (a core count of some device): "
                               f"{'fewer programs than' if n < sm_count else 'not sized to'} the {sm_count} SMs "
                               "here, whatever the problem size", call.lineno, ["grid_to_cores", "grid_per_item"],
                               "high" if n < sm_count else "low", fn.name,
                               {"programs": n, "sm_count": sm_count, "capped": bool(capped)}))
    return out


def causal_compare(node: ast.AST, loop_var: str) -> bool:
    """``a[:, None] >= b[None, :]`` (or <=, >, <) where the column side moves with the loop index."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and
            isinstance(node.ops[0], (ast.GtE, ast.Gt, ast.LtE, ast.Lt))):
        return False
    sides = (ast.unparse(node.left), ast.unparse(node.comparators[0]))
    names = [{n.id for n in ast.walk(s) if isinstance(n, ast.Name)} for s in (node.left, node.comparators[0])]
    rowcol = ("[:, None]" in sides[0] and "[None, :]" in sides[1]) or ("[None, :]" in sides[0] and "[:, None]" in sides[1])
    return rowcol and any(loop_var in ns for ns in names)


def _program_names(fn: ast.FunctionDef) -> set[str]:
    """Names whose value depends on tl.program_id (transitively)."""
    pairs = [(t.id, n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name)]
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, v in pairs:
            if name not in out and (any(isinstance(c, ast.Call) and _name(c.func) == "tl.program_id"
                                        for c in ast.walk(v)) or {n.id for n in ast.walk(v) if isinstance(n, ast.Name)} & out):
                out.add(name)
                changed = True
    return out


def causal_patterns(tree: ast.Module) -> list[Pattern]:
    """The loop must start where the key range starts (its lower bound independent of the program index):
    a loop that already starts at the diagonal block (the second half of a split) only walks diagonal tiles."""
    out = []
    for fn in _kernels(tree):
        pid_names = _program_names(fn)
        for lp in (n for n in ast.walk(fn) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)):
            if not (isinstance(lp.iter, ast.Call) and _name(lp.iter.func) in ("range", "tl.range")):
                continue
            start = lp.iter.args[0] if len(lp.iter.args) > 1 else None
            if start is not None and ({n.id for n in ast.walk(start) if isinstance(n, ast.Name)} & pid_names or any(
                    isinstance(c, ast.Call) and _name(c.func) == "tl.program_id" for c in ast.walk(start))):
                continue
            hit = next((n for n in ast.walk(lp) if causal_compare(n, lp.target.id)), None)
            if hit is not None:
                out.append(Pattern("causal_mask_every_tile",
                                   f"{fn.name} builds the causal mask ({ast.unparse(hit)}) on every iteration of the "
                                   f"loop over {lp.target.id}: only the tiles that cross the diagonal need it",
                                   hit.lineno, ["causal_split"], "medium", fn.name))
                break
    return out


def autotune_configs(fn: ast.FunctionDef) -> list[ast.Call] | None:
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and _name(d.func) in ("triton.autotune", "autotune"):
            cfg = next((k.value for k in d.keywords if k.arg == "configs"), d.args[0] if d.args else None)
            if isinstance(cfg, ast.List) and all(isinstance(c, ast.Call) for c in cfg.elts):
                return list(cfg.elts)
    return None


def autotune_patterns(tree: ast.Module) -> list[Pattern]:
    out = []
    for fn in _kernels(tree):
        cfgs = autotune_configs(fn)
        if cfgs is None:
            continue
        distinct = {ast.unparse(c) for c in cfgs}
        if len(distinct) <= 2:
            out.append(Pattern("tiny_autotune_space",
                               f"{fn.name} is autotuned over {len(distinct)} distinct config"
                               f"{'s' if len(distinct) > 1 else ''} ({len(cfgs)} listed): the tuner has nothing "
                               "to choose from", cfgs[0].lineno, ["autotune_widen"], "medium", fn.name,
                               {"configs": len(distinct)}))
    return out


LAYOUT_METHODS = ("permute", "transpose", "t", "movedim", "swapaxes", "mT", "T")


def layout_copy(e: ast.expr) -> bool:
    """``x.permute(...).contiguous()`` / ``x.t().contiguous()`` / ``x.transpose(a, b).reshape(...)``: a copy
    into a new layout (a transposed view made dense)."""
    if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Attribute) or e.func.attr not in ("contiguous", "reshape"):
        return False
    inner = e.func.value
    while isinstance(inner, (ast.Call, ast.Attribute)):
        attr = inner.func if isinstance(inner, ast.Call) else inner
        if isinstance(attr, ast.Attribute) and attr.attr in LAYOUT_METHODS:
            return True
        inner = attr.value if isinstance(attr, ast.Attribute) else None
    return False


def wrapper_copy_patterns(tree: ast.Module) -> list[Pattern]:
    kernels = {k.name for k in _kernels(tree)}
    out = []
    for host in _hosts(tree):
        calls = _launches(host, kernels)
        if not calls:
            continue
        passed = {n.id for c in calls for a in c.args for n in [a] if isinstance(n, ast.Name)}
        for n in ast.walk(host):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
                    n.targets[0].id in passed and layout_copy(n.value):
                out.append(Pattern("wrapper_copy",
                                   f"{host.name} copies {ast.unparse(n.value.func.value)} into a new layout "
                                   f"({n.targets[0].id} = ...{n.value.func.attr}()) before the launch: one extra "
                                   "read and write of the tensor that strides in the kernel would avoid",
                                   n.lineno, ["strided_args"], "medium", None, {"tensor": n.targets[0].id}))
        # after the launch: ``return out.transpose(1, 2).contiguous()`` of an output the kernel wrote
        for n in ast.walk(host):
            if isinstance(n, ast.Return) and n.value is not None and layout_copy(n.value):
                base = n.value.func.value
                while isinstance(base, (ast.Call, ast.Attribute)):
                    base = base.func.value if isinstance(base, ast.Call) else base.value
                if isinstance(base, ast.Name) and base.id in passed:
                    out.append(Pattern("wrapper_copy",
                                       f"{host.name} returns {ast.unparse(n.value)}: the kernel's output copied into "
                                       "a new layout after the launch, one extra read and write of it that "
                                       "writing through the strides of the final layout would avoid",
                                       n.lineno, ["strided_args"], "medium", None,
                                       {"tensor": base.id, "side": "output"}))
    return out


def flat_index_patterns(tree: ast.Module) -> list[Pattern]:
    """A flat element index (``pid * BLOCK + tl.arange``) split into a row and a column by ``// D`` and ``% D``,
    the column then scaled in an access's address (``out + c * M + r``): one side walks the array a stride apart
    per lane, which 2-D tiles would coalesce."""
    out = []
    for fn in _kernels(tree):
        assigns = {t.id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Name)}
        flat = {n for n, v in assigns.items() if any(isinstance(c, ast.Call) and _name(c.func) == "tl.arange"
                                                      for c in ast.walk(v))
                and any(isinstance(c, ast.Call) and _name(c.func) == "tl.program_id" or isinstance(c, ast.Name)
                        and isinstance(assigns.get(c.id), ast.Call) and _name(assigns[c.id].func) == "tl.program_id"
                        for c in ast.walk(v))}
        split: dict[str, dict[str, str]] = {}
        for n, v in assigns.items():
            if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.FloorDiv, ast.Mod)) and \
                    isinstance(v.left, ast.Name) and v.left.id in flat:
                split.setdefault(f"{v.left.id}|{ast.unparse(v.right)}", {})[type(v.op).__name__] = n
        for key, parts in split.items():
            if set(parts) != {"FloorDiv", "Mod"}:
                continue
            col = parts["Mod"]
            for c in ast.walk(fn):
                if not (isinstance(c, ast.Call) and _name(c.func) in ("tl.load", "tl.store") and c.args):
                    continue
                if any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult) and
                       col in {x.id for x in ast.walk(b) if isinstance(x, ast.Name)} for b in ast.walk(c.args[0])):
                    flat_name, div = key.split("|", 1)
                    out.append(Pattern("flat_index_2d",
                                       f"{fn.name} walks a 2-D array through the flat index {flat_name} split by "
                                       f"// and % {div}; the {_name(c.func)[3:]} at this line scales the column "
                                       f"{col}: its lanes are a stride apart (2-D tiles would coalesce both sides)",
                                       c.lineno, ["flat_tiles"], "medium", fn.name, {"divisor": div}))
                    break
    return out


def abs_reduce_operand(e: ast.expr) -> ast.expr | None:
    """The tensor of a whole-tensor two-pass absolute maximum in host code, else None: ``x.abs().max()`` or
    ``x.abs().amax()`` (no arguments: one value), or the same of ``torch.abs(x)``. ``.abs()`` writes a temporary as
    large as ``x`` that the reduction reads back. Maxima along dims are not taken (absmax_norm has no rewrite for them)."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("max", "amax")):
        return None
    if e.args or e.keywords:
        return None
    inner = e.func.value
    if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "abs"):
        return None
    if not inner.args and not inner.keywords and _name(inner.func.value) != "torch":
        return inner.func.value
    if _name(inner.func) == "torch.abs" and len(inner.args) == 1 and not inner.keywords:
        return inner.args[0]
    return None


def launch_path(tree: ast.Module) -> set[str]:
    """The module's host functions that ``launch`` reaches by calling them by name (``launch`` included): what a
    benchmark times, not ``reference`` or ``make_inputs``."""
    hosts = {h.name: h for h in _hosts(tree)}
    seen, todo = set(), ["launch"]
    while todo:
        name = todo.pop()
        if name in seen or name not in hosts:
            continue
        seen.add(name)
        todo += [_name(c.func) for c in ast.walk(hosts[name]) if isinstance(c, ast.Call)]
    return seen


def abs_reduce_patterns(tree: ast.Module) -> list[Pattern]:
    """``x.abs().max()`` in a host function on ``launch``'s path: three passes over ``x`` (read, write the absolute
    values, read them back) for what one reduction reads once (a quantizing launcher's scale, before its kernel)."""
    out = []
    path = launch_path(tree)
    for host in _hosts(tree):
        if host.name not in path:
            continue
        for n in ast.walk(host):
            x = abs_reduce_operand(n)
            if x is not None:
                out.append(Pattern("abs_reduce_two_pass",
                                   f"{host.name} takes {ast.unparse(n)}: the absolute values of {ast.unparse(x)} "
                                   "are written to a temporary and read back, three passes over the tensor where "
                                   "one reduction reads it once",
                                   n.lineno, ["absmax_norm"], "medium", None, {"expr": ast.unparse(n)}))
    return out


def clone_inplace_patterns(tree: ast.Module) -> list[Pattern]:
    """``launch`` copies a tensor that a kernel then updates in place, where the copy can be folded into the kernel
    (``inplace.fold_plan``): the copy reads and writes the whole tensor once more than the update needs."""
    plan = fold_plan(tree)
    if plan is None:
        return []
    copies = ", ".join(f"{r} = {r}.clone()" for r in plan.roots)
    return [Pattern("clone_then_inplace",
                    f"launch copies ({copies}) and {', '.join(plan.kernels)} then reads and writes the copies in "
                    "place: each copied tensor is read and written once more than the update needs (the kernel can "
                    "read the original and write a fresh buffer)",
                    plan.lines[0], ["clone_fold"], "medium", next(iter(plan.kernels)), {"copies": ", ".join(plan.roots)})]


def single_assignments(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """The names ``fn`` assigns exactly once (``name = value``, no other binding), with their values."""
    seen: dict[str, list[ast.expr]] = {}
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        seen.setdefault(x.id, []).append(n.value if isinstance(n, ast.Assign) and t is x else None)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def steps_by_two(e: ast.expr, assigns: dict[str, ast.expr], depth: int = 0) -> bool:
    """``e`` scales an index built on ``tl.arange`` by 2 (through names assigned once, ``single_assignments``): its
    lanes are a pair apart (``x + offs`` and ``x + offs + 1`` are a shifted tile, no pair)."""
    def from_arange(x: ast.expr, d: int = 0) -> bool:
        return any(isinstance(c, ast.Call) and _name(c.func) == "tl.arange" for c in ast.walk(x)) or d < 4 and any(
            isinstance(n, ast.Name) and n.id in assigns and from_arange(assigns[n.id], d + 1) for n in ast.walk(x))
    if any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult) and any(
            isinstance(x, ast.Constant) and x.value == 2 and from_arange(y) for x, y in ((b.left, b.right),
                                                                                      (b.right, b.left)))
           for b in ast.walk(e)):
        return True
    return depth < 3 and any(isinstance(n, ast.Name) and n.id in assigns and
                             steps_by_two(assigns[n.id], assigns, depth + 1) for n in ast.walk(e))


def interleaved_pair_patterns(tree: ast.Module) -> list[Pattern]:
    """``tl.load(p)`` and ``tl.load(p + 1)`` (or two stores) where ``p`` walks every second element: an interleaved
    pair read as two tensors, each lane moving one element (``tools/rewrite/deinterleave.py``)."""
    out = []
    for fn in _kernels(tree):
        assigns = single_assignments(fn)
        calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and _name(c.func) in ("tl.load", "tl.store")
                 and c.args]
        direct = {(_name(c.func), ast.dump(c.args[0])) for c in calls}
        for c in calls:
            a = c.args[0]
            if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add) and isinstance(a.right, ast.Constant) and \
                    a.right.value == 1 and (_name(c.func), ast.dump(a.left)) in direct and \
                    steps_by_two(a.left, assigns):
                kind, p = _name(c.func)[3:], ast.unparse(a.left)
                out.append(Pattern("interleaved_pair",
                                   f"{fn.name} reads {p} and {p} + 1 with two {kind}s, its address stepping by 2 "
                                   "elements: an interleaved pair taken as two strided tensors, each lane moving one "
                                   "element; one tile of both taken apart with tl.split (tl.join for a store) moves "
                                   "whole pairs", c.lineno, ["deinterleave"], "medium", fn.name, {"pointer": p}))
    return out


def source_patterns(tree: ast.Module) -> list[Pattern]:
    return (pow_patterns(tree) + program_count_patterns(tree) + causal_patterns(tree) + autotune_patterns(tree)
            + wrapper_copy_patterns(tree) + flat_index_patterns(tree) + abs_reduce_patterns(tree)
            + clone_inplace_patterns(tree) + interleaved_pair_patterns(tree))
