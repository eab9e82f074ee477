"""L2 eviction hints for a kernel's loads, the tuner's ``evict`` knob (``space._evict_knobs``): data each program
streams once leaves L2 first, data programs share stays.

A load without ``eviction_policy`` allocates its lines in L2 like any other, so a kernel that streams a large tensor
once pushes out what other programs (or the next kernel) read again, and, when L2 holds dirty lines a previous
kernel wrote, makes them be written back while it reads. Inductor marks every load it emits: a load read once in a
reduction gets ``evict_first``, a broadcast one (a weight row, a table every row indexes) ``evict_last``. Measured
by hand on an H100 (``bench/results/inductor_probe_h100_20261207``: FlagGems' two-stage max over 64 MB, L2 flushed
before every call as the bench does): the author's first stage 36.8 us, the same kernel with ``evict_first`` on its
one load 31.8 us, torch.compile 32.1 us.

Per kernel, a load (``tl.load`` with no ``eviction_policy``, not volatile) gets

- ``evict_first`` where its address depends on every program axis the kernel uses (each program reads its own
  data) and its base pointer is loaded nowhere else in the kernel (a second load of the same tensor wants the lines
  kept); where the tensor is walked once in each of several loops (a norm's passes over its row), the last pass
  ``evict_first`` and the passes before it ``evict_last`` (they keep the row for the next), as Inductor writes
  its looped reductions; two loads of one tensor in the same loop or outside loops get no hint;
- ``evict_last`` where its address depends on some program axes but not all, or on none (programs along the other
  axes read the same elements: rotary tables, a norm's weight).

A load in an arm of an ``if`` that no recorded launch takes (``launches``: the tune job's record, its test read
from each launch's constexprs, ``EVEN_K`` false where every launch had it true) gets no hint and counts as no load
of its tensor: a hint there would change code no checked input reaches, which the verifier rejects
(``verify/plan/branches``: vLLM's bgmv expand, 87x in batch_u, kept its initial kernel when its tuned winner
hinted both arms of ``if EVEN_K``). ``build`` and ``instrument`` know no launch (every arm is hinted, the untaken
one never runs); ``emit`` writes the winner with the record's launches.

A load whose base pointer cannot be told (a block pointer, a pointer loaded from memory) keeps no hint. Kernels
that ask for no program id, and matmuls (``tl.dot``), are left alone. Whether the hints pay is the tune job's to
measure (the knob is 0 or 1 beside the tiles and warps); they change no value, only where lines live.
"""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst
from tritondx.tools.rewrite.cst_util import (
    assignments,
    calls_named,
    code_of,
    dependent_names,
    dotted,
    int_value,
    kwarg,
    names_in,
    param_names,
)
from tritondx.tools.verify.plan.evaluator import Evaluator

FIRST, LAST = "evict_first", "evict_last"


def _axis(call: cst.Call) -> int | None:
    if not call.args:
        return 0
    return int_value(kwarg(call, "axis", 0))


def _base(e: cst.BaseExpression, params: set[str], assigns: dict[str, list[cst.BaseExpression]],
          depth: int = 0) -> str | None:
    """The pointer parameter an address starts from: the leftmost term of its ``+`` chain, through local names."""
    while isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Subtract)):
        e = e.left
    while isinstance(e, cst.Call) and dotted(e.func) in ("tl.multiple_of", "tl.max_contiguous") and e.args:
        e = e.args[0].value
    if isinstance(e, cst.Name):
        if e.value in params:
            return e.value
        values = assigns.get(e.value, [])
        if depth < 8 and values:
            bases = {_base(v, params, assigns, depth + 1) for v in values}
            return bases.pop() if len(bases) == 1 else None
    return None


def _loops_of_loads(fn: cst.FunctionDef) -> dict[int, int | None]:
    """``id(load call) -> id(the outermost loop around it)`` (None: not in a loop), in source order."""
    out: dict[int, int | None] = {}
    stack: list[int] = []

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            stack.append(id(n))

        def leave_For(self, n: cst.For) -> None:
            stack.pop()

        def visit_While(self, n: cst.While) -> None:
            stack.append(id(n))

        def leave_While(self, n: cst.While) -> None:
            stack.pop()

        def visit_Call(self, n: cst.Call) -> None:
            if dotted(n.func) == "tl.load":
                out[id(n)] = stack[0] if stack else None
    fn.body.visit(V())
    return out


def _untaken_loads(fn: cst.FunctionDef, envs: list[dict[str, Any]]) -> set[int]:
    """``id`` of each ``tl.load`` in an ``if`` arm that no launch takes: the test evaluated on each launch's
    constexprs (``envs``) and the same side every time; a test any launch cannot tell leaves both arms."""
    out: set[int] = set()
    if not envs:
        return out

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            try:
                test = ast.parse(code_of(n.test).strip(), mode="eval").body
            except SyntaxError:
                return
            sides = {Evaluator(dict(env)).truth(test) for env in envs}
            if len(sides) != 1 or None in sides:
                return
            dead = n.orelse if sides.pop() else n.body
            if dead is not None:
                out.update(id(c) for c in calls_named(dead, "tl.load"))
    fn.body.visit(V())
    return out


def kernel_hints(fn: cst.FunctionDef, launches: list[dict[str, Any]] | None = None) -> dict[int, str]:
    """``id(load call) -> policy`` for the loads of ``fn`` that get a hint (module docstring); ``launches``: the tune
    job's recorded launches (``record.LaunchRecord`` dicts), those of ``fn`` read for the arms they take (none of
    ``fn``: every arm counts)."""
    pid_calls = calls_named(fn, "tl.program_id")
    axes = {_axis(c) for c in pid_calls}
    if not pid_calls or None in axes or calls_named(fn, "tl.dot"):
        return {}   # a matmul's tiles are re-read by the programs of a row or a column: L2 reuse is its own art
    deps = {a: dependent_names(fn, lambda v, a=a: any(_axis(c) == a for c in calls_named(v, "tl.program_id")))
            for a in axes}
    params = set(param_names(fn))
    assigns = assignments(fn)   # not counting ``p += BLOCK``: a pointer advanced through its tensor keeps its base
    envs = [dict(r.get("constexprs") or {}) for r in launches or [] if r.get("kernel") == fn.name.value]
    untaken = _untaken_loads(fn, envs)
    loads = [c for c in calls_named(fn, "tl.load") if id(c) not in untaken]
    bases = {id(c): _base(c.args[0].value, params, assigns) if c.args else None for c in loads}
    count: dict[str, int] = {}
    for b in bases.values():
        if b is not None:
            count[b] = count.get(b, 0) + 1
    # a tensor walked in several loops (a norm's passes over its row): each pass but the last keeps its lines for the
    # next, the last streams (what Inductor writes for its looped reductions)
    loops = _loops_of_loads(fn)
    passes: dict[str, list[int]] = {}
    for c in loads:
        b = bases[id(c)]
        if b is not None and count[b] > 1:
            passes.setdefault(b, []).append(id(c))
    last_pass = {ids[-1] for ids in passes.values()
                 if all(loops.get(i) is not None for i in ids) and len({loops[i] for i in ids}) == len(ids)}
    multi = {i for ids in passes.values() if ids[-1] in last_pass for i in ids}
    out: dict[int, str] = {}
    for c in loads:
        if not c.args or kwarg(c, "eviction_policy", 6) is not None or bases[id(c)] is None:
            continue
        vol = kwarg(c, "volatile", 7)
        if vol is not None and code_of(vol) != "False":
            continue
        addr = c.args[0].value
        used = names_in(addr)
        on = {a for a in axes if used & deps[a] or any(_axis(p) == a for p in calls_named(addr, "tl.program_id"))}
        if on == axes:
            if count[bases[id(c)]] == 1 or id(c) in last_pass:
                out[id(c)] = FIRST
            elif id(c) in multi:
                out[id(c)] = LAST
        else:
            out[id(c)] = LAST
    return out
