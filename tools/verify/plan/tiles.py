"""Which block constant tiles which dimension of a task's shape (issue 34), read from the candidate's source.

A kernel that walks a dimension in blocks (``for k in range(0, K, BLOCK_K)``, ``offs < n`` with ``offs`` built from
``tl.arange(0, BLOCK)``) is wrong, when it is, at a size whose remainder in that block it mishandles
(``range(0, K - 1, BLOCK_K)`` skips the last element exactly when ``K % BLOCK_K == 1``). The verifier derives, per
block constant and the dimension it tiles, sizes with remainders 1 and block-1 and the size block+1 (``cases.py``).

Nothing of the candidate runs here. ``launch`` is evaluated over its AST (``branches._Walker``) at two shapes that
differ in every dimension (``shapes.moved_shape``): a kernel parameter equal to dimension ``i`` at both is that
dimension; a ``tl.constexpr`` parameter bound to the same integer at both (or, autotuned, to the values of its
configs) is a block constant. A block constant tiles a dimension when one expression of the kernel relates them (a
comparison, ``%``, ``//``, ``cdiv`` or ``range``), through the kernel's assignments (``offs = pid * BLOCK +
tl.arange(0, BLOCK)``; ``mask = offs < n``). (The lead's ``tools/tune/tunables.py`` classifies tiles for the search;
it was not in the tree when this was written.)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from tritondx.tools.verify.plan.launch_walk import _StopWalk, _Walker
from tritondx.tools.verify.plan.evaluator import UNKNOWN, Evaluator, dotted, module_constants

#: relations between a size and a block: comparisons, these operators, these calls
_REL_OPS = (ast.Mod, ast.FloorDiv)
_REL_CALLS = ("cdiv", "range", "static_range")


@dataclass(frozen=True)
class Tile:
    dim: int          # index into the task's shape
    param: str        # the kernel parameter that is that dimension ("K")
    block: str        # the block constant ("BLOCK_K")
    value: int        # its value
    kernel: str

    def label(self) -> str:
        return f"{self.block}={self.value} tiles dim {self.dim} ({self.param})"


class _Recorder(_Walker):
    """The walker, keeping each kernel launch's bound parameters."""

    def __init__(self, tree: ast.Module):
        super().__init__(tree)
        self.bound: list[tuple[str, dict]] = []

    def launch_kernel(self, name: str, call: ast.Call, ev) -> None:
        if not any(isinstance(a, ast.Starred) for a in call.args):
            args = [ev.eval(a) for a in call.args]
            kwargs = {k.arg: ev.eval(k.value) for k in call.keywords if k.arg}
            self.bound.append((name, self.bind(self.functions[name], args, kwargs)))
        super().launch_kernel(name, call, ev)


def launches(tree: ast.Module, inputs: tuple) -> list[tuple[str, dict]]:
    """(kernel name, its parameters' values) of every kernel launch ``launch(*inputs)`` makes, evaluated."""
    w = _Recorder(tree)
    fn = w.functions.get("launch")
    if fn is None:
        return []
    try:
        w.run_function(fn, list(inputs), {}, 0)
    except (_StopWalk, RecursionError):
        pass
    return w.bound


def _constexprs(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args + fn.args.kwonlyargs
            if a.annotation is not None and (dotted(a.annotation) or "").endswith("constexpr")]


#: the most configurations a comprehension of ``triton.Config`` is expanded to
MAX_CONFIGS = 4096


def _module_values(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound by one plain assignment, to the expression bound (``BLOCKS = [64, 128]``)."""
    seen: dict[str, list[ast.expr]] = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            seen.setdefault(st.targets[0].id, []).append(st.value)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def _bind(target: ast.expr, value: Any) -> dict[str, Any] | None:
    if isinstance(target, ast.Name):
        return {target.id: value}
    if isinstance(target, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
        out: dict[str, Any] = {}
        for t, v in zip(target.elts, value):
            b = _bind(t, v)
            if b is None:
                return None
            out.update(b)
        return out
    return None


def _config_calls(node: ast.expr | None, names: dict[str, ast.expr], env: dict[str, Any], depth: int = 0
                  ) -> list[tuple[ast.expr, dict[str, Any]]]:
    """The ``triton.Config(...)`` expressions of an autotuner's ``configs=``, each with the names its values read:
    a list, lists joined with ``+``, a module-level name bound to one, or a comprehension over lists the evaluator
    reads (``[triton.Config({"BT": bt}, num_warps=w) for bt in [16, 32] for w in NUM_WARPS]``; an ``if`` filter
    is ignored: every value a config may take is a block to check)."""
    if node is None or depth > 4:
        return []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [(c, env) for c in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _config_calls(node.left, names, env, depth + 1) + _config_calls(node.right, names, env, depth + 1)
    if isinstance(node, ast.Name) and node.id in names:
        return _config_calls(names[node.id], names, env, depth + 1)
    if isinstance(node, ast.ListComp):
        envs = [env]
        for gen in node.generators:
            nxt = []
            src = gen.iter   # a module-level list by its name (``for w in NUM_WARPS``)
            if isinstance(src, ast.Name) and src.id in names:
                src = names[src.id]
            for e in envs:
                items = Evaluator(e).eval(src)
                if not isinstance(items, (list, tuple)):
                    return []
                for item in items:
                    b = _bind(gen.target, item)
                    if b is None:
                        return []
                    nxt.append({**e, **b})
            envs = nxt[:MAX_CONFIGS]
        return [(node.elt, e) for e in envs]
    return []


def _config_values(fn: ast.FunctionDef, name: str, names: dict[str, ast.expr], env: dict[str, Any]) -> set[int]:
    """The values ``name`` takes in an ``@triton.autotune`` decorator's ``triton.Config({...})`` list, in the forms
    ``_config_calls`` reads (``names``: the module's names bound once; ``env``: its constants)."""
    out: set[int] = set()
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and (dotted(d.func) or "").endswith("autotune")):
            continue
        configs = next((k.value for k in d.keywords if k.arg == "configs"), d.args[0] if d.args else None)
        for c, cenv in _config_calls(configs, names, env):
            if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Dict):
                for k, v in zip(c.args[0].keys, c.args[0].values):
                    if isinstance(k, ast.Constant) and k.value == name:
                        val = Evaluator(cenv).eval(v)
                        if isinstance(val, int) and not isinstance(val, bool):
                            out.add(val)
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def relations(fn: ast.FunctionDef) -> set[frozenset[str]]:
    """Sets of parameter names related by one expression of the kernel (a comparison, ``%``, ``//``, ``cdiv``,
    ``range``), each name expanded through the kernel's assignments to the parameters it is computed from."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    deps: dict[str, set[str]] = {p: {p} for p in params}

    def expand(node: ast.AST) -> set[str]:
        out: set[str] = set()
        for n in _names(node):
            out |= deps.get(n, set())
        return out

    body = [n for st in fn.body for n in ast.walk(st)]   # the kernel's own code, not its decorators (an
    # autotuner's ``if b * w <= 512`` filter names no dimension)
    for _ in range(3):   # assignments in loops may feed earlier ones: a few passes reach a fixed point
        for node in body:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                src = expand(node.value)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in _names(t):
                        if n not in params:
                            deps[n] = deps.get(n, set()) | src
            elif isinstance(node, ast.For):
                src = expand(node.iter)
                for n in _names(node.target):
                    if n not in params:
                        deps[n] = deps.get(n, set()) | src
    out: set[frozenset[str]] = set()
    for node in body:
        rel = isinstance(node, ast.Compare) or (isinstance(node, ast.BinOp) and isinstance(node.op, _REL_OPS)) or \
            (isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in _REL_CALLS)
        if rel:
            got = expand(node)
            if len(got) > 1:
                out.add(frozenset(got))
    return out


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def block_tiles(tree: ast.Module, base: tuple[int, ...], base_inputs: tuple, moved: tuple[int, ...],
                moved_inputs: tuple) -> list[Tile]:
    """The block constants of the kernels ``launch`` starts and the shape dimension each tiles (module docstring).
    ``base`` and ``moved`` differ in every dimension (``shapes.moved_shape``); their inputs are made by the task."""
    a, b = launches(tree, base_inputs), launches(tree, moved_inputs)
    fns = {fn.name: fn for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    names, consts = _module_values(tree), module_constants(tree)
    out: dict[tuple, Tile] = {}
    for (name, ea), (name_b, eb) in zip(a, b):
        if name != name_b or name not in fns:
            continue
        fn = fns[name]
        dims: dict[str, int] = {}
        for p, v in ea.items():
            va, vb = _int(v), _int(eb.get(p, UNKNOWN))
            if va is None or vb is None:
                continue
            hits = [i for i in range(len(base)) if base[i] == va and moved[i] == vb]
            if len(hits) == 1:
                dims[p] = hits[0]
        blocks: dict[str, set[int]] = {}
        for p in _constexprs(fn):
            va, vb = _int(ea.get(p, UNKNOWN)), _int(eb.get(p, UNKNOWN))
            if va is not None and va == vb and va >= 2:
                blocks[p] = {va}
            elif ea.get(p, UNKNOWN) is UNKNOWN and (vals := {v for v in _config_values(fn, p, names, consts)
                                                             if v >= 2}):
                blocks[p] = vals
        if not dims or not blocks:
            continue
        for rel in relations(fn):
            for d in rel & set(dims):
                for blk in rel & set(blocks):
                    for val in sorted(blocks[blk]):
                        out.setdefault((dims[d], val, blk), Tile(dims[d], d, blk, val, name))
    return sorted(out.values(), key=lambda t: (t.dim, t.value, t.block))


def residue_sizes(block: int, listed: int) -> list[tuple[int, str]]:
    """Sizes of one dimension for a block constant, near the listed size ``listed``: remainder 1 and block-1 (one
    more and one fewer than a whole number of blocks), and block+1 (one block and one element); with why."""
    q = max(1, listed // block)
    out = [(q * block + 1, f"remainder 1 of {block}"), (q * block + block - 1, f"remainder {block - 1} of {block}"),
           (block + 1, f"one block of {block} and 1")]
    seen: set[int] = set()
    return [(v, why) for v, why in out if v >= 1 and not (v in seen or seen.add(v))]
