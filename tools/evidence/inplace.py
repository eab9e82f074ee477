"""A launcher that copies a tensor and then updates the copy in place with a kernel (ast only; nothing runs).

``launch`` that must leave its inputs unchanged while the kernel writes into one (an optimizer step, an in-place
activation, a cache update wrapped as a function) copies it first: ``p = p.clone()`` and then ``kernel(p, ...)``
reads ``p`` and writes it back. The copy reads and writes the whole tensor once more than the work needs: the
kernel can read the original and write a fresh buffer (``tools/rewrite/clone_fold.py``). ``fold_plan`` says
where that holds, conservatively:

- ``launch`` rebinds a parameter to its clone (``x = x.clone()``, a statement of its own), and from there ``x``
  only travels by name, positionally or by keyword, through host functions of the module to ``kernel[grid](...)``
  launches, or is read for its metadata (``.numel()``, ``.shape``, ``.stride()``, ...), returned or asserted on.
  Torch reading its contents on the host, a view of it, a star-argument or a second binding: no plan.
- in each kernel that receives it, the pointer and what is computed from it (``ptr + offs``) are only loaded and
  stored through (no atomics, no other call); the loads and stores are statements of the kernel's body itself (no
  loop or branch around them), every load before the first store (a load after a store would read the kernel's own
  write, which the fresh buffer no longer has at the source); the stores' addresses and masks use no loaded value
  (an indirect scatter or a mask read from memory leaves elements the copy filled and the fresh buffer does not).
  Whether the stores cover every element (the grid) is not proven here: the verifier poisons fresh allocations,
  so an element left unwritten fails its checks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

#: tensor attributes a host function may read from a copied tensor: metadata, never its contents
META_ATTRS = frozenset({"numel", "shape", "stride", "size", "dim", "ndim", "device", "dtype", "is_cuda", "layout",
                        "is_contiguous", "element_size", "data_ptr", "nelement", "get_device"})
#: the suffix of the names the fold adds (the source tensor beside its fresh buffer)
SRC = "__src"


@dataclass
class KernelArg:
    """One launch ``host`` makes of ``kernel`` with a copied tensor ``name`` as its parameter ``param``."""
    host: str
    kernel: str
    param: str
    name: str
    position: int | None        # positional index in the launch, None: passed by keyword


@dataclass
class FoldPlan:
    roots: list[str]                                             # launch's parameters rebound to their clones
    lines: list[int] = field(default_factory=list)               # the lines of those clones in launch
    hosts: dict[str, list[str]] = field(default_factory=dict)    # host function -> its parameters that carry a copy
    calls: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # (caller, callee) -> (param, name)
    launches: list[KernelArg] = field(default_factory=list)
    kernels: dict[str, list[str]] = field(default_factory=dict)  # kernel -> pointer parameters folded


def dotted_name(node: ast.AST) -> str:
    """``a.b.c`` of a name or attribute chain; "" for anything else."""
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(dotted_name(d.func if isinstance(d, ast.Call) else d).endswith("jit") for d in fn.decorator_list)


def clone_of(stmt: ast.stmt) -> str | None:
    """``x`` of a statement ``x = x.clone()``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    v = stmt.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "clone" and not v.args \
            and not v.keywords and isinstance(v.func.value, ast.Name) and v.func.value.id == stmt.targets[0].id:
        return stmt.targets[0].id
    return None


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args]


def _parents(fn: ast.AST) -> dict[ast.AST, ast.AST]:
    return {c: p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}


class _Bail(Exception):
    pass


def fold_plan(tree: ast.Module) -> FoldPlan | None:
    """Where ``launch``'s copies can be folded into the kernels that update them (module docstring), or None."""
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    launch = fns.get("launch")
    if launch is None:
        return None
    roots, clones = [], []
    for s in launch.body:
        x = clone_of(s)
        if x and x in _params(launch) and x not in roots:
            roots.append(x)
            clones.append(s)
    if not roots:
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    if any(r + SRC in names for r in roots):
        return None
    plan = FoldPlan(roots, [s.lineno for s in clones])
    try:
        _walk(fns, launch, set(roots), plan, set(), skip=set(clones))
        for kernel, params in plan.kernels.items():
            for p in params:
                _check_kernel(fns[kernel], p)
            uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == kernel]
            planned = {(ka.host, ka.param) for ka in plan.launches if ka.kernel == kernel}
            if len(uses) != 1 or len(planned) != len(params):
                raise _Bail   # launched more than once, or named elsewhere: its other callers would break
        _only_planned_calls(tree, fns, plan)
    except _Bail:
        return None
    # every copy reaches a kernel that writes it
    reached = {ka.name for ka in plan.launches if ka.host == "launch"} | \
              {n for (caller, _), pairs in plan.calls.items() if caller == "launch" for _, n in pairs}
    return plan if plan.launches and set(roots) <= reached else None


def _walk(fns: dict[str, ast.FunctionDef], fn: ast.FunctionDef, tracked: set[str], plan: FoldPlan,
          seen: set[tuple[str, frozenset]], skip: set[ast.stmt]) -> None:
    key = (fn.name, frozenset(tracked))
    if key in seen:
        return
    seen.add(key)
    parents = _parents(fn)
    for s in ast.walk(fn):   # a copy bound again (other than launch's own clone): no plan
        if s in skip:
            continue
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
            targets = s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)] if not \
                isinstance(s, ast.With) else [i.optional_vars for i in s.items]
            for t in targets:
                if t is not None and any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(t)):
                    raise _Bail
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Name) and node.id in tracked) or any(node in ast.walk(s) for s in skip):
            continue
        up = parents.get(node)
        if isinstance(up, ast.Attribute) and up.attr in META_ATTRS:
            continue
        if isinstance(up, (ast.Return, ast.Tuple)) and _returned(up, parents):
            continue
        if isinstance(up, ast.Compare) and all(isinstance(o, (ast.Is, ast.IsNot)) for o in up.ops):
            continue   # identity, never contents
        if isinstance(up, ast.keyword):
            call = parents.get(up)
            pos = None
            param = up.arg
        elif isinstance(up, ast.Call) and node in up.args:
            call, pos, param = up, up.args.index(node), None
        else:
            raise _Bail
        if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args) or \
                any(k.arg is None for k in call.keywords):
            raise _Bail
        target = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        callee = fns.get(dotted_name(target))
        if callee is None:
            raise _Bail
        ps = _params(callee)
        if param is None:
            if pos >= len(ps):
                raise _Bail
            param = ps[pos]
        elif param not in ps:
            raise _Bail
        if _is_jit(callee):
            if not isinstance(call.func, ast.Subscript):
                raise _Bail   # a jit function called from host code other than as a launch
            plan.launches.append(KernelArg(fn.name, callee.name, param, node.id, pos))
            plan.kernels.setdefault(callee.name, [])
            if param not in plan.kernels[callee.name]:
                plan.kernels[callee.name].append(param)
            continue
        if callee.name == "launch":
            raise _Bail
        pairs = plan.calls.setdefault((fn.name, callee.name), [])
        if (param, node.id) not in pairs:
            if any(p == param for p, _ in pairs):
                raise _Bail   # the same parameter given different copies by two calls
            pairs.append((param, node.id))
        got = plan.hosts.setdefault(callee.name, [])
        if param not in got:
            got.append(param)
        _walk(fns, callee, {param}, plan, seen, set())


def _only_planned_calls(tree: ast.Module, fns: dict[str, ast.FunctionDef], plan: FoldPlan) -> None:
    """Each host function that takes a source (``p__src``, keyword-only, no default: no branch the checks would have
    to reach) is called only from the plan's callers, and every such call hands on every copy the plan gives it."""
    for host in plan.hosts:
        for fn in tree.body:
            refs = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == host]
            if not refs:
                continue
            caller = fn.name if isinstance(fn, ast.FunctionDef) else None
            pairs = plan.calls.get((caller, host))
            calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.func.id == host]
            if not pairs or len(calls) != len(refs):
                raise _Bail
            for c in calls:
                given = {a.id for a in c.args if isinstance(a, ast.Name)} | \
                        {k.value.id for k in c.keywords if isinstance(k.value, ast.Name)}
                if not {n for _, n in pairs} <= given:
                    raise _Bail


def _returned(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while isinstance(node, ast.Tuple):
        node = parents.get(node)
    return isinstance(node, ast.Return)


def _loads_in(e: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and dotted_name(c.func) == "tl.load" for c in ast.walk(e))


def derived_names(kernel: ast.FunctionDef, ptr: str) -> set[str]:
    """``ptr`` and the kernel's names computed from it (``offs_ptr = ptr + offs``), for the fold's twins."""
    return _flow(kernel, ptr)[0]


def _flow(kernel: ast.FunctionDef, ptr: str) -> tuple[set[str], set[str]]:
    derived, loaded = {ptr}, set()   # names computed from the pointer, and from loaded values (to a fixed point)
    changed = True
    while changed:
        changed = False
        for s in ast.walk(kernel):
            if isinstance(s, (ast.Assign, ast.AugAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                used = {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}
                tnames = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                if isinstance(s, ast.AugAssign):
                    used |= tnames
                into_ptr = bool(used & derived) and not _loads_in(s.value)
                if into_ptr and not tnames <= derived:
                    derived |= tnames
                    changed = True
                if (_loads_in(s.value) or used & loaded) and not tnames <= loaded:
                    loaded |= tnames
                    changed = True
    return derived, loaded


def _check_kernel(kernel: ast.FunctionDef, ptr: str) -> None:
    """The module docstring's conditions on a kernel's pointer parameter ``ptr``; raises ``_Bail``."""
    derived, loaded = _flow(kernel, ptr)
    if ptr + SRC in {a.arg for a in kernel.args.args} or (kernel.args.defaults and
                                                         _params(kernel).index(ptr) >= len(_params(kernel)) - len(kernel.args.defaults)):
        raise _Bail
    if derived & loaded:
        raise _Bail
    parents = _parents(kernel)
    loads, stores = [], []
    for node in ast.walk(kernel):
        if not (isinstance(node, ast.Name) and node.id in derived):
            continue
        up, prev = parents.get(node), node
        while isinstance(up, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute)) or \
                (isinstance(up, ast.Call) and dotted_name(up.func) in ("tl.multiple_of", "tl.max_contiguous")):
            prev, up = up, parents.get(up)
        if isinstance(up, (ast.Assign, ast.AugAssign)):
            continue   # a derivation (checked with the name it defines) or the name defined
        if isinstance(up, ast.Call) and dotted_name(up.func) in ("tl.load", "tl.store") and up.args and up.args[0] is prev:
            (loads if dotted_name(up.func) == "tl.load" else stores).append(up)
            continue
        raise _Bail
    if not stores:
        raise _Bail
    # each derivation a statement of its own line with names for targets: the rewrite adds its twin after that line
    stmts = [n for n in ast.walk(kernel) if isinstance(n, ast.stmt) and n is not kernel]
    for d in stmts:
        if isinstance(d, (ast.Assign, ast.AugAssign)):
            targets = d.targets if isinstance(d, ast.Assign) else [d.target]
            if any(isinstance(n, ast.Name) and n.id in derived for t in targets for n in ast.walk(t)) and (
                    not all(isinstance(t, ast.Name) for t in targets)
                    or sum(1 for o in stmts if o.lineno == d.lineno and not isinstance(o, ast.expr)) > 1):
                raise _Bail

    def stmt_index(call: ast.Call) -> int:
        node = call
        while parents.get(node) is not kernel:
            node = parents.get(node)
            if node is None or isinstance(node, (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef)) and \
                    node is not kernel:
                raise _Bail
        return kernel.body.index(node)

    first_store = min(stmt_index(c) for c in stores)
    if any(stmt_index(c) >= first_store for c in loads):
        raise _Bail
    for c in stores:
        mask = [k.value for k in c.keywords if k.arg == "mask"] + c.args[2:3]
        for e in [c.args[0], *mask]:
            if _loads_in(e) or {n.id for n in ast.walk(e) if isinstance(n, ast.Name)} & loaded:
                raise _Bail
