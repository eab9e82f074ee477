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
  write, which the fresh buffer no longer has at the source); the stores' addresses use no loaded value (an
  indirect scatter leaves elements the copy filled and the fresh buffer does not).
  Whether the stores cover every element (the grid) is not proven here: the verifier poisons fresh allocations,
  so an element left unwritten fails its checks.
- a store whose mask uses a loaded value (``mask = (offs < n) & ~tl.load(skip_ptr + offs, ...)``) skips elements
  the copy filled: it folds as a guarded store (``GuardedStore``), ``tl.store(A, tl.where(M, V, tl.load(A__src,
  mask=B)), mask=B)``. ``B``, the bounds, is ``M`` expanded through the kernel body's top-level assignments (the
  definition that reaches each use) and split into its top-level ``&`` conjuncts, less those that read memory. In
  ``B`` and not ``M`` the fresh buffer gets the source's value, which is what the copy held there (nothing else
  writes it: the conditions below); outside ``B`` nothing is written, as before (the verifier's poison checks it).
  Two programs whose ``B`` overlap would race the old values against the new; ``_guard`` requires, else no plan:
  the pointer's only store, a statement of its own; every name the expansions meet is bound only by top-level
  ``x = ...`` / ``x op= ...`` statements (or is a parameter); its address is, expanded, ``ptr + tl.program_id(a)
  * S + tl.arange(0, S)`` (terms in any order, ``S`` a constexpr parameter or an integer, ``a`` the only axis the
  kernel asks for: programs own disjoint blocks) and the address of a load of the pointer; the dropped conjuncts
  use, outside their loads, no block index (so ``B`` is where the kernel writes when the loaded values let it: a
  kernel that is memory-safe for every loaded value is safe on ``B``) and the kept ones only index arithmetic.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

#: tensor attributes a host function may read from a copied tensor: metadata, never its contents
META_ATTRS = frozenset({"numel", "shape", "stride", "size", "dim", "ndim", "device", "dtype", "is_cuda", "layout",
                        "is_contiguous", "element_size", "data_ptr", "nelement", "get_device"})
#: the suffix of the names the fold adds (the source tensor beside its fresh buffer)
SRC = "__src"
#: calls a guarded store's dropped (data) conjuncts may make outside their loads: elementwise, no block index
DATA_CALLS = frozenset({"to", "tl.where", "tl.abs", "tl.maximum", "tl.minimum"})
#: calls its kept (bounds) conjuncts may make: index arithmetic, nothing read from memory
BOUNDS_CALLS = frozenset({"to", "tl.arange", "tl.program_id", "tl.num_programs", "tl.multiple_of", "tl.max_contiguous",
                          "tl.where", "tl.maximum", "tl.minimum", "tl.full", "tl.zeros"})
#: the largest expansion of a mask or an address followed (nodes)
MAX_EXPANSION = 4000


@dataclass
class KernelArg:
    """One launch ``host`` makes of ``kernel`` with a copied tensor ``name`` as its parameter ``param``."""
    host: str
    kernel: str
    param: str
    name: str
    position: int | None        # positional index in the launch, None: passed by keyword


@dataclass
class GuardedStore:
    """A store to a folded pointer whose mask reads memory (module docstring): the rewrite makes it
    ``tl.store(A, tl.where(M, V, tl.load(<A's twin>, mask=bounds)), mask=bounds)``."""
    line: int                  # the store statement's line
    bounds: str | None         # the address-only mask, of names bound at the store; None: the whole block
    temps: list[tuple[int, str]] = field(default_factory=list)   # (line, statement): added before that line


@dataclass
class FoldPlan:
    roots: list[str]                                             # launch's parameters rebound to their clones
    lines: list[int] = field(default_factory=list)               # the lines of those clones in launch
    hosts: dict[str, list[str]] = field(default_factory=dict)    # host function -> its parameters that carry a copy
    calls: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # (caller, callee) -> (param, name)
    launches: list[KernelArg] = field(default_factory=list)
    kernels: dict[str, list[str]] = field(default_factory=dict)  # kernel -> pointer parameters folded
    guards: dict[str, list[GuardedStore]] = field(default_factory=dict)  # kernel -> its stores with a data mask


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
    """Where ``launch``'s copies can be folded into the kernels that update them (module docstring), or None.

    All of them where that holds; else the ones that fold on their own (one copy the kernel writes wholly, beside a
    cache it writes a slot of: the cache's copy stays, the other folds), together if they still fold together."""
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    launch = fns.get("launch")
    if launch is None:
        return None
    clones: dict[str, ast.stmt] = {}
    for s in launch.body:
        x = clone_of(s)
        if x and x in _params(launch) and x not in clones:
            clones[x] = s
    if not clones:
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    if any(r + SRC in names for r in clones):
        return None
    plan = _plan_for(tree, fns, launch, clones, list(clones))
    if plan is not None or len(clones) == 1:
        return plan
    alone = [r for r in clones if _plan_for(tree, fns, launch, clones, [r]) is not None]
    if len(alone) > 1:
        plan = _plan_for(tree, fns, launch, clones, alone)
    return plan if plan is not None or not alone else _plan_for(tree, fns, launch, clones, alone[:1])


def _plan_for(tree: ast.Module, fns: dict[str, ast.FunctionDef], launch: ast.FunctionDef,
              clones: dict[str, ast.stmt], roots: list[str]) -> FoldPlan | None:
    """The plan that folds the copies ``roots`` of ``clones`` (the others stay copies), or None."""
    plan = FoldPlan(list(roots), [clones[r].lineno for r in roots])
    try:
        _walk(fns, launch, set(roots), plan, set(), skip={clones[r] for r in roots})
        for kernel, params in plan.kernels.items():
            for p in params:
                guards = _check_kernel(fns[kernel], p)
                if guards:
                    plan.guards.setdefault(kernel, []).extend(guards)
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
    handed: dict[str, int] = {}   # copy -> the calls it is handed to in this function (one at most)
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
        handed[node.id] = handed.get(node.id, 0) + 1
        if handed[node.id] > 1 or _in_loop(call, parents, fn):
            raise _Bail   # a second update of the copy (another call, or the same one again) would read the source
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


def _in_loop(node: ast.AST, parents: dict[ast.AST, ast.AST], fn: ast.FunctionDef) -> bool:
    """Whether ``node`` sits in a ``for``/``while`` (or a comprehension) of ``fn``."""
    up = parents.get(node)
    while up is not None and up is not fn:
        if isinstance(up, (ast.For, ast.AsyncFor, ast.While, ast.comprehension)):
            return True
        up = parents.get(up)
    return False


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


def _check_kernel(kernel: ast.FunctionDef, ptr: str) -> list[GuardedStore]:
    """The module docstring's conditions on a kernel's pointer parameter ``ptr``, and its guarded stores; raises
    ``_Bail``."""
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
    def uses_loaded(e: ast.AST) -> bool:
        return _loads_in(e) or bool({n.id for n in ast.walk(e) if isinstance(n, ast.Name)} & loaded)

    guards = []
    for c in stores:
        mask = [k.value for k in c.keywords if k.arg == "mask"] + c.args[2:3]
        if uses_loaded(c.args[0]):
            raise _Bail   # a scatter
        if any(uses_loaded(m) for m in mask):
            g = _guard(kernel, ptr, c, stores, loads, stmt_index)
            if g is not None:
                guards.append(g)
    return guards



# -- stores whose mask reads memory (the module docstring's guarded stores) -----------------------------------------

class _Defs:
    """The top-level ``x = ...`` / ``x op= ...`` statements of a kernel's body: what reaches a statement, expanded."""

    def __init__(self, kernel: ast.FunctionDef) -> None:
        self.defs: dict[str, list[tuple[int, ast.stmt]]] = {}
        simple = set()
        for i, s in enumerate(kernel.body):
            t = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else \
                s.target if isinstance(s, ast.AugAssign) else None
            if isinstance(t, ast.Name):
                self.defs.setdefault(t.id, []).append((i, s))
                simple.add(t)
        # bound any other way (a loop, a branch, a tuple, ``:=``): the definition that reaches a use is not followed
        self.unresolved = {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name)
                           and isinstance(n.ctx, (ast.Store, ast.Del)) and n not in simple}
        self.memo: dict[tuple[str, int], ast.expr] = {}

    def reaching(self, name: str, at: int) -> tuple[int, ast.stmt] | None:
        if name in self.unresolved:
            raise _Bail
        return next((d for d in reversed(self.defs.get(name, [])) if d[0] < at), None)

    def expand(self, e: ast.expr, at: int) -> ast.expr:
        """``e`` as evaluated at statement ``at``, every name replaced by what reaches it (parameters stay)."""
        defs = self

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.expr:
                return copy.deepcopy(defs._name(n.id, at)) if isinstance(n.ctx, ast.Load) else n

        out = Sub().visit(copy.deepcopy(e))
        if sum(1 for _ in ast.walk(out)) > MAX_EXPANSION:
            raise _Bail
        return out

    def _name(self, name: str, at: int) -> ast.expr:
        d = self.reaching(name, at)
        if d is None:
            return ast.Name(name, ast.Load())
        i, s = d
        if (name, i) not in self.memo:
            self.memo[(name, i)] = self.expand(s.value, i) if isinstance(s, ast.Assign) else \
                ast.BinOp(self._name(name, i), s.op, self.expand(s.value, i))
        return self.memo[(name, i)]

    def conjuncts(self, e: ast.expr, at: int) -> list[tuple[ast.expr, int]]:
        """The top-level ``&`` conjuncts of ``e`` at statement ``at``, each with the statement it is evaluated at;
        a name that reads memory is followed into its definition."""
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitAnd):
            return self.conjuncts(e.left, at) + self.conjuncts(e.right, at)
        d = self.reaching(e.id, at) if isinstance(e, ast.Name) else None
        if d is not None and _loads_in(self.expand(e, at)):
            i, s = d
            if isinstance(s, ast.Assign):
                return self.conjuncts(s.value, i)
            if isinstance(s.op, ast.BitAnd):
                return self.conjuncts(ast.Name(e.id, ast.Load()), i) + self.conjuncts(s.value, i)
        return [(e, at)]

    def write(self, e: ast.expr, at: int, store: int, temps: list[tuple[int, str]], name: str) -> str:
        """``e`` (evaluated at statement ``at``) as code with the same value at statement ``store``: itself where its
        names are bound as they were, the definition of a name bound since, else a temporary added before ``at``."""
        names = {n.id for n in ast.walk(e) if isinstance(n, ast.Name)}
        if all(self.reaching(x, at) == self.reaching(x, store) for x in names):
            return ast.unparse(e)
        d = self.reaching(e.id, at) if isinstance(e, ast.Name) else None
        if d is not None and isinstance(d[1], ast.Assign):
            return self.write(d[1].value, d[0], store, temps, name)
        tmp = f"{name}_{len(temps)}" if temps else name
        temps.append((at, f"{tmp} = {ast.unparse(e)}"))
        return tmp


def _call_name(c: ast.Call) -> str:
    return "to" if isinstance(c.func, ast.Attribute) and c.func.attr == "to" else dotted_name(c.func)


def _calls_outside_loads(e: ast.AST) -> set[str]:
    out, todo = set(), [e]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call):
            if _call_name(n) == "tl.load":
                continue
            out.add(_call_name(n))
        todo.extend(ast.iter_child_nodes(n))
    return out


def _terms(e: ast.expr) -> list[ast.expr]:
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _terms(e.left) + _terms(e.right)
    return [e]


def _axis(e: ast.AST) -> int | None:
    """``a`` of ``tl.program_id(a)`` with an integer ``a``; None for anything else."""
    if not (isinstance(e, ast.Call) and dotted_name(e.func) == "tl.program_id"):
        return None
    given = e.args + [k.value for k in e.keywords if k.arg == "axis"]
    if len(given) != 1 or len(e.args) + len(e.keywords) != 1 or not isinstance(given[0], ast.Constant) \
            or type(given[0].value) is not int:
        return None
    return given[0].value


def _owned(addr: ast.expr, ptr: str, kernel: ast.FunctionDef) -> bool:
    """The expanded address is ``ptr + tl.program_id(a) * S + tl.arange(0, S)`` (terms and factors in any order, ``S``
    a constexpr parameter or an integer) and the kernel asks for no other axis: program ``i`` owns ``[i*S, i*S+S)``."""
    terms = _terms(addr)
    rest = [t for t in terms if not (isinstance(t, ast.Name) and t.id == ptr)]
    if len(terms) != 3 or len(rest) != 2:
        return False
    block = next((t for t in rest if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult)), None)
    ar = next((t for t in rest if isinstance(t, ast.Call) and dotted_name(t.func) == "tl.arange"), None)
    if block is None or ar is None or ar.keywords or len(ar.args) != 2 or \
            not (isinstance(ar.args[0], ast.Constant) and ar.args[0].value == 0):
        return False
    pid, size = (block.left, block.right) if _axis(block.left) is not None else (block.right, block.left)
    constexprs = {a.arg for a in kernel.args.args if a.annotation is not None
                  and dotted_name(a.annotation).endswith("constexpr")}
    if _axis(pid) is None or ast.dump(size) != ast.dump(ar.args[1]) or not (
            isinstance(size, ast.Name) and size.id in constexprs
            or isinstance(size, ast.Constant) and type(size.value) is int):
        return False
    pids = [n for n in ast.walk(kernel) if isinstance(n, ast.Call) and dotted_name(n.func) == "tl.program_id"]
    return all(_axis(n) == _axis(pid) for n in pids)


def _alone(kernel: ast.FunctionDef, s: ast.stmt) -> bool:
    """``s`` is the only statement on its lines (the rewrite edits and adds whole lines)."""
    inner = set(ast.walk(s))
    return not any(isinstance(o, ast.stmt) and o is not kernel and o not in inner and
                   o.lineno <= s.end_lineno and s.lineno <= o.end_lineno for o in ast.walk(kernel))


def _guard(kernel: ast.FunctionDef, ptr: str, store: ast.Call, stores: list[ast.Call], loads: list[ast.Call],
           index) -> GuardedStore | None:
    """The guarded store (module docstring) for ``ptr``'s ``store``, whose mask uses a loaded value; None where the
    mask, expanded, reads no memory after all (a name loaded into only after the store); raises ``_Bail``."""
    at = index(store)
    st = kernel.body[at]
    given = store.args[2:] + [k.value for k in store.keywords if k.arg == "mask"]
    if len(stores) != 1 or not (isinstance(st, ast.Expr) and st.value is store) or not _alone(kernel, st) or \
            len(store.args) < 2 or len(given) != 1 or any(k.arg in (None, "pointer", "value") for k in store.keywords):
        raise _Bail
    defs = _Defs(kernel)
    addr = defs.expand(store.args[0], at)
    if not _owned(addr, ptr, kernel) or \
            not any(ast.dump(defs.expand(c.args[0], index(c))) == ast.dump(addr) for c in loads):
        raise _Bail
    bounds, seen, data = [], set(), False
    for e, i in defs.conjuncts(given[0], at):
        full = defs.expand(e, i)
        if _loads_in(full):
            data = True
            if not _calls_outside_loads(full) <= DATA_CALLS:
                raise _Bail   # a block index (or an unknown call) outside the loads: the bounds may hide in it
        elif not _calls_outside_loads(full) <= BOUNDS_CALLS:
            raise _Bail
        elif ast.dump(full) not in seen:
            seen.add(ast.dump(full))
            bounds.append((e, i))
    if not data:
        return None
    temps: list[tuple[int, str]] = []
    name = f"_tdx_{ptr}_bounds"
    if any(isinstance(n, ast.Name) and n.id.startswith(name) for n in ast.walk(kernel)):
        raise _Bail
    code = [defs.write(e, i, at, temps, name) for e, i in bounds]
    if any(not _alone(kernel, kernel.body[i]) for i, _ in temps):
        raise _Bail
    text = " & ".join(c if len(code) == 1 or c.isidentifier() else f"({c})" for c in code)
    return GuardedStore(st.lineno, text or None, [(kernel.body[i].lineno, t) for i, t in temps])
