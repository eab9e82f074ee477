"""A task's launch knobs, each where its value is defined; the instrumented source; a configuration's source.

Static (libcst, on the orchestrator's side: no task code runs here). ``launches.py`` finds every launch reachable
from ``launch()`` (through helpers, closures and ``autograd.Function.apply``) and where each launch value is
defined; ``tunables.py`` says which constexprs are tiles. A tile's knob **scales** its definition by a power of two
(a literal, a local, a helper's return, or a computed expression such as ``triton.next_power_of_2(N)``), so the
launcher's grid, buffers and other launches that read the same definition move with it; ``num_warps`` and
``num_stages`` knobs **set** the option (at its definition, or at the call); an ``evict`` knob (0 or 1) puts L2
eviction hints on a kernel's loads (``tune/evict.kernel_hints``: what each program streams once
``evict_first``, what programs share ``evict_last``), timed in the same job as every other knob. A value that an assert or a
``view``/``reshape`` also reads, that some kernel uses as a layout constant, or that an autotuner already tunes, is
left alone, and ``Space.skipped`` says why.

``instrument`` writes the source the tune job loads (each knob read through ``tools/tune/knob.py``); ``emit`` writes
the readable source of one configuration (the values written where they are defined, nothing else changed).
"""

from __future__ import annotations

from typing import Literal

import libcst as cst
from pydantic import BaseModel, Field

from tritondx.tools.rewrite.cst_util import (
    add_call_kwargs,
    code_of,
    dotted,
    jit_functions,
    kwarg,
    module_names,
    param_names,
)
from tritondx.tools.rewrite.launch_edit import _cdiv_divisors
from tritondx.tools.rewrite.launch_scan import (
    OPTIONS,
    autotune_configs,
    configs_arg,
    free_names,
    is_extent,
    meta_keys,
)
from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.rewrite.launches import _analysis, _task_dtypes
from tritondx.tools.tune.evict import kernel_hints
from tritondx.tools.tune.knob import split
from tritondx.tools.tune.tunables import callees, dot_operands, host_semantic, kernel_roles

KnobKind = Literal["tile", "count", "grid", "warps", "stages", "loop", "evict", "pin"]
#: the name the instrumented source reads knobs through
KNOB_FN = "_tdx_knob"
KNOB_SET_FN = "_tdx_knob_set"


class Knob(BaseModel):
    key: str                         # "kernel.PARAM" of the first launch that reads it
    kind: KnobKind
    how: Literal["scale", "set", "split"]   # split: a program count whose shares divide the work (knob.py)
    params: list[str] = Field(default_factory=list)   # "kernel.PARAM" of every launch value it moves
    value: int | None = None         # its static value where the source has one
    where: str = ""                  # "local BLOCK_M in argmax, line 120: 128"
    dot: bool = False                # sizes a tl.dot operand: stays >= 16
    grid_tied: bool = False          # the launch's grid reads it (smaller: more programs)
    autotune: bool = False           # a value of an autotuned kernel's config: the job sets it to the launched pick
                                     # unless the configuration changes it (kind "pin": never searched)


class Skipped(BaseModel):
    param: str                       # "kernel.PARAM"
    why: str


class Space(BaseModel):
    knobs: list[Knob] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)

    def knob(self, key: str) -> Knob:
        return next(k for k in self.knobs if k.key == key)

    def for_kernels(self, kernels: set[str]) -> list[Knob]:
        return [k for k in self.knobs if any(p.split(".", 1)[0] in kernels for p in k.params)]


class _Plan:
    """The nodes to wrap (node id -> key) and the options to add to calls (call id -> {option: key})."""

    def __init__(self) -> None:
        self.wrap: dict[int, str] = {}
        self.add: dict[int, dict[str, str]] = {}
        self.defaults: dict[str, int] = {}   # key -> value written when an option is added at the call
        self.autotune: dict[int, list[tuple[str, str]]] = {}   # configs list node id -> [(param, key)]
        self.unread: set[int] = set()        # of those, configs not read statically (no first config to fall back on)
        self.loops: dict[int, str] = {}      # a kernel's ``for ... in range(...)`` node id -> its loop knob's key
        self.site: dict[str, int] = {}       # a tile knob's key -> the launch (call node id) that first read it
        self.evict: dict[int, tuple[str, str]] = {}   # a kernel's ``tl.load`` node id -> (its evict knob, the policy)


#: a loop knob's values: 0 leaves the loop as written; s > 0 writes ``tl.range(..., num_stages=s)``
LOOP_STAGES = (0, 1, 2, 3, 4)
#: loop knobs per kernel (its first pipelineable loops in source order)
MAX_LOOP_KNOBS = 2
#: the instrumented source's module constant for a loop knob: ``_TDX_LOOP_<n> = tl.constexpr(... or None)``
LOOP_CONST = "_TDX_LOOP_{}"


def _loop_knobs(s, an, plan: "_Plan", by_key: dict[str, "Knob"]) -> None:
    """A kernel's loops that load from global memory (and store to none of the pointers they load, have no
    break/continue and hold no inner loop: ``rewrite.pipelining``'s conditions) get a knob: Triton's software
    pipeliner pipelines a loop's loads that feed no ``tl.dot`` only where the loop asks for stages
    (``tl.range(..., num_stages=s)``); the kernel's ``num_stages`` option alone leaves such loops as they are."""
    from tritondx.tools.rewrite.pipelining import _loops, _pipelineable
    n = 0
    for loop in _loops(s.kfn):
        if n >= MAX_LOOP_KNOBS or id(loop) in plan.loops or not _pipelineable(s.kfn, loop):
            continue
        if any(a.keyword is not None for a in loop.iter.args):
            continue
        key = f"{s.kernel}.loop{n}"
        n += 1
        plan.loops[id(loop)] = key
        k = by_key.setdefault(key, Knob(key=key, kind="loop", how="set", value=0,
                                         where=f"loop in {s.kernel}, line {an.line(loop)}: "
                                               f"for {code_of(loop.target)} in {code_of(loop.iter)[:50]}"))
        k.params.append(key)


#: the instrumented source's module constants for an evict knob: ``_TDX_EVICT_<n>_<first|last>``, the policy string
#: or "" (Triton's default) as the job sets the knob
EVICT_CONST = "_TDX_EVICT_{}_{}"


def _evict_knobs(s, an, plan: "_Plan", by_key: dict[str, "Knob"], launches: list[dict] | None = None) -> None:
    """A kernel whose loads ``kernel_hints`` would hint gets an ``evict`` knob: 0 its loads as written, 1 hinted.
    Measured by hand on the H100 (``bench/results/inductor_probe_h100_20261207``): FlagGems' two-stage max 36.8 us ->
    31.8 us with ``evict_first`` on its one load, torch.compile 32.1 us."""
    key = f"{s.kernel}.evict"
    if key in by_key:
        return
    hints = kernel_hints(s.kfn, launches)
    if not hints:
        return
    for node_id, policy in hints.items():
        plan.evict[node_id] = (key, policy)
    firsts = sum(1 for p in hints.values() if p == "evict_first")
    by_key[key] = Knob(key=key, kind="evict", how="set", value=0, params=[key],
                       where=f"loads of {s.kernel}, line {an.line(s.kfn)}: {firsts} streamed (evict_first), "
                             f"{len(hints) - firsts} shared (evict_last)")


def _has_loop(kfn: cst.FunctionDef, jit: dict[str, cst.FunctionDef] | None = None) -> bool:
    """A loop in the kernel or in a device function it calls (what ``num_stages`` pipelines)."""
    found = False

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            nonlocal found
            found = True

        def visit_While(self, n: cst.While) -> None:
            nonlocal found
            found = True

    for fn in callees(kfn, jit):
        fn.body.visit(V())
    return found


def _kernel_globals(res) -> set[str]:
    out: set[str] = set()
    for kfn in res.an.kernels.values():
        class V(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                out.add(n.value)
        kfn.body.visit(V())
    return out


def _analyse(source: str, launches: list[dict] | None = None) -> tuple[Space, _Plan, object]:
    """``launches``: the tune job's record, the eviction hints only in the arms they take (None: every arm)."""
    res = _analysis(source, _task_dtypes(source))
    an = res.an
    space, plan = Space(), _Plan()
    in_kernels = _kernel_globals(res)
    # pass 1: every use of each definition, so a definition some launch reads as a layout constant is left alone
    uses: dict[int, list[tuple[object, str, str]]] = {}
    jit = an.kernels   # every @triton.jit function: what a kernel passes to a device function counts there too
    for s in res.sites:
        roles = kernel_roles(s.kfn, jit)
        for p, d in s.params.items():
            if p in OPTIONS:
                continue
            node = d.node if d.node is not None and d.value is not None else d.expr
            if node is not None:
                uses.setdefault(id(node), []).append((s, p, roles.get(p, "other")))
    by_key: dict[str, Knob] = {}
    for s in res.sites:
        name = f"{s.kernel}"
        auto = autotune_configs(s.kfn, an.module)   # also a comprehension, a name or a config function
        tuned_by_autotune: set[str] = set()
        if auto is not None:   # its configs' values are knobs; a tile the launcher passes is one as for any kernel
            _autotune_knobs(s, auto, space, plan, by_key, jit)
            tuned_by_autotune = {*OPTIONS, *(p for c in auto[0] for p in c),
                                 *(p for p, d in s.params.items() if d.kind == "autotune_config")}
        roles = kernel_roles(s.kfn, jit)
        dots = dot_operands(s.kfn, jit)
        for p, d in s.params.items():
            pname = f"{name}.{p}"
            if p in tuned_by_autotune:
                continue
            if p in OPTIONS:
                if p == "num_stages" and not _has_loop(s.kfn, jit):
                    continue                       # no loop to pipeline: stages change nothing
                kind: KnobKind = "warps" if p == "num_warps" else "stages"
                arg = kwarg(s.call, p)
                static = d.node is not None and d.value is not None and d.kind in ("literal", "local")
                node = d.node if static else arg
                if node is None and d.kind == "computed" and d.expr is not None and d.also:
                    node = d.expr     # a helper's returns (through ``**meta``): set in each of them
                if node is not None:
                    key = plan.wrap.get(id(node)) or pname
                    plan.wrap[id(node)] = key
                    for other_return in (d.also if node is d.expr else []):
                        plan.wrap[id(other_return)] = key
                    where = f"{d.kind} {d.name or p} = {code_of(node)[:60]}"
                elif d.kind == "computed":   # passed in a ``**mapping``: adding it at the call would pass it twice
                    space.skipped.append(Skipped(param=pname, why="; ".join(d.chain)[:120]))
                    continue
                else:
                    key = pname
                    plan.add.setdefault(id(s.call), {})[p] = key
                    plan.defaults[key] = d.value or (4 if p == "num_warps" else 3)
                    where = f"not passed (Triton's default {plan.defaults[key]}): written at the call"
                k = by_key.setdefault(key, Knob(key=key, kind=kind, how="set", value=d.value, where=where))
                k.params.append(pname)
                continue
            role = roles.get(p, "other")
            if role not in ("tile", "count", "split"):
                if role == "semantic":
                    space.skipped.append(Skipped(param=pname, why="the kernel uses it as a layout constant "
                                                                  "(reshape, view, assert or index split)"))
                continue
            if d.kind in ("autotune_config", "heuristic"):
                space.skipped.append(Skipped(param=pname, why=f"set by {d.kind.replace('_', ' ')}"))
                continue
            node = d.node if d.node is not None and d.value is not None else d.expr
            if node is None or role != "split" and node is d.expr and is_extent(node):
                # a tile that is a tensor's dimension as it stands (``k.shape[-1]``, ``k.size(-1)``): the data's
                # extent, not a block
                space.skipped.append(Skipped(param=pname, why=f"{d.kind}: {'; '.join(d.chain)[:120]}"))
                continue
            g = s.grid_value   # does this launch's grid read the value (a smaller tile means more programs)?
            divisors = [n for x in _grid_reads(s, an) for n in _cdiv_divisors(x, d.value)] \
                if d.kind == "literal" else []
            tied = g is not None and (p in meta_keys(g) or bool(d.name and d.name in free_names(g))
                                      or bool(divisors)
                                      or any(o is s and q == "grid" for o, q in res.users.get(id(node), [])))
            if role == "count" and not tied:
                space.skipped.append(Skipped(param=pname, why="a loop count the grid does not follow"))
                continue
            if role == "split" and not tied:
                space.skipped.append(Skipped(param=pname, why="a split count the grid does not follow"))
                continue
            other = [f"{o.kernel}.{q}" for o, q, r in uses.get(id(node), []) if r == "semantic"]
            if other:
                space.skipped.append(Skipped(param=pname, why=f"also a layout constant of {', '.join(other)}"))
                continue
            host = host_semantic(d.scope.fn if d.scope is not None else None, d.name)
            if host:
                space.skipped.append(Skipped(param=pname, why=f"part of the data layout: {host}"))
                continue
            if d.kind == "module_constant" and d.name in in_kernels:
                space.skipped.append(Skipped(param=pname, why=f"module constant {d.name} is read inside a kernel"))
                continue
            key = plan.wrap.get(id(node)) or pname
            arg = kwarg(s.call, p) if role == "tile" else None
            if key != pname and plan.site.get(key) == id(s.call) and arg is not None and arg is not node \
                    and id(arg) not in plan.wrap:
                # a second tile of this launch read from the same definition (``BLOCK_M=BLOCK, BLOCK_N=BLOCK``):
                # its own knob, scaled at its argument; the definition (and the grid that reads it) stays the first's
                plan.wrap[id(arg)] = pname
                by_key[pname] = Knob(key=pname, kind="tile", how="scale", value=d.value, params=[pname],
                                     where=f"argument of {pname}: {code_of(arg)[:60]} (shared with {key})",
                                     dot=p in dots)
                continue
            plan.wrap[id(node)] = key
            if node is d.expr:
                for other_return in d.also:   # a helper's other returns of the same value scale with it
                    plan.wrap[id(other_return)] = key
            plan.site.setdefault(key, id(s.call))
            for n in divisors:                    # a call literal: cdiv divisors of the same value in its grid
                plan.wrap[id(n)] = key
            where = (f"{d.kind} {d.name + ' ' if d.name else ''}in {d.scope.qual if d.scope else '<module>'}"
                     f", line {an.line(node)}: {code_of(node)[:60]}") if not d.also else \
                f"{d.chain[-1]}, line {an.line(node)}: {code_of(node)[:60]} and at line(s) " \
                f"{', '.join(str(an.line(n)) for n in d.also)}"
            k = by_key.setdefault(key, Knob(key=key, kind="grid" if role == "split" else role,
                                             how="split" if role == "split" else "scale", value=d.value,
                                             where=where, dot=p in dots))
            k.dot = k.dot or p in dots
            k.grid_tied = k.grid_tied or tied
            k.params.append(pname)
        _grid_knobs(s, plan, by_key)
        _loop_knobs(s, an, plan, by_key)
        _evict_knobs(s, an, plan, by_key, launches)
    space.knobs = list(by_key.values())
    return space, plan, an.module


def _grid_reads(s, an) -> list[cst.CSTNode]:
    """The launch's grid expression and, one step back, what each local it reads is assigned: where a call
    literal's ``cdiv`` divisors are found (``parts = triton.cdiv(n, 4096)`` with grid ``(parts,)`` and
    ``BLOCK=4096`` at the call: a tuned ``BLOCK=2048`` launched half the programs it needed)."""
    g = s.grid_value
    if g is None:
        return []
    out = [g]
    for name in sorted(free_names(g)):
        d = an.lookup(name, s.grid_scope or s.scope, s.line)
        if d is not None and d[0] == "assign" and isinstance(d[1], cst.BaseExpression):
            out.append(d[1])
    return out


def _grid_knobs(s, plan: _Plan, by_key: dict[str, Knob]) -> None:
    """A program count written as a number in the grid (``(32,)``, ``(M, 48)``, ``min(M, 48)``): a count sized for
    another device (a core-count heuristic, a persistent loop). Scaled where it stands; the screen rejects a count
    the kernel cannot take (a grid-stride loop takes any)."""
    g = s.grid_value
    if not isinstance(g, (cst.Tuple, cst.List)):
        return
    for i, el in enumerate(g.elements):
        e = el.value
        cands = [e] if isinstance(e, cst.Integer) else \
            [a.value for a in e.args if isinstance(a.value, cst.Integer)] \
            if isinstance(e, cst.Call) and dotted(e.func) == "min" else []
        for n in cands:
            if int(n.value, 0) < 2 or id(n) in plan.wrap:
                continue
            key = f"{s.kernel}.grid{i}"
            plan.wrap[id(n)] = key
            k = by_key.setdefault(key, Knob(key=key, kind="grid", how="scale", value=int(n.value, 0), grid_tied=True,
                                             where=f"program count in the grid of {s.kernel}: {code_of(g)[:60]}"))
            k.params.append(f"{s.kernel}.grid{i}")


def _autotune_knobs(s, auto, space: Space, plan: _Plan, by_key: dict[str, Knob],
                    jit: dict[str, cst.FunctionDef]) -> None:
    """An autotuned kernel: its config list becomes one config whose every value is a knob. Tiles, num_warps and
    num_stages are searched from the autotuner's own pick (what the launch recorded); the rest is pinned to it."""
    configs, call = auto
    node = configs_arg(call)
    name = s.kernel
    if node is None:
        space.skipped.append(Skipped(param=name, why="autotuned without a configs argument (left alone)"))
        return
    if id(node) in plan.autotune:
        return
    roles = kernel_roles(s.kfn, jit)
    dots = dot_operands(s.kfn, jit)
    if configs:
        params = list(dict.fromkeys([p for c in configs for p in c if p not in OPTIONS])) + list(OPTIONS)
        where = f"@triton.autotune config of {name} ({len(configs)} configs)"
    else:   # configs not read statically: the values the launch analysis gives them, at the pick the launch recorded
        params = [p for p, d in s.params.items() if p not in OPTIONS and d.kind == "autotune_config"] + list(OPTIONS)
        where = f"@triton.autotune config of {name} (configs not read statically: from the recorded pick)"
        plan.unread.add(id(node))
    pairs = []
    for p in params:
        key = f"{name}.{p}"
        role = roles.get(p, "other") if p not in OPTIONS else ("warps" if p == "num_warps" else "stages")
        if p == "num_stages" and not _has_loop(s.kfn, jit):
            role = "pin"
        kind = role if role in ("tile", "count", "warps", "stages") else "pin"
        first = next((c[p] for c in configs if p in c), {"num_warps": 4, "num_stages": 3}.get(p)) if configs else None
        k = by_key.setdefault(key, Knob(key=key, kind=kind, how="set", autotune=True, dot=p in dots, value=first,
                                         where=where))
        k.params.append(f"{name}.{p}")
        pairs.append((p, key))
    plan.autotune[id(node)] = pairs


def _configs_node(pairs: list[tuple[str, str]], value) -> cst.BaseExpression:
    """``[triton.Config({...}, num_warps=.., num_stages=..)]`` with each value from ``value(key)``."""
    consts = ", ".join(f"{p!r}: {value(k)}" for p, k in pairs if p not in OPTIONS)
    opts = ", ".join(f"{p}={value(k)}" for p, k in pairs if p in OPTIONS)
    return cst.parse_expression(f"[triton.Config({{{consts}}}, {opts})]")


def build(source: str) -> Space:
    """The task's knobs and what was left alone (and why)."""
    return _analyse(source)[0]


class _Rewrite(cst.CSTTransformer):
    def __init__(self, plan: _Plan, leaf, pinned=None, only: set[str] | None = None, range_fn: str = "tl.range",
                 unread_test=None, evict=None) -> None:
        self.plan, self.leaf, self.pinned, self.only, self.range_fn = plan, leaf, pinned, only, range_fn
        self.unread_test = unread_test   # key -> test that the job set it (instrument: unread configs' fallback)
        self.evict = evict               # (key, policy) -> the load's ``eviction_policy`` value, or None: as written

    def on_leave(self, original, updated):
        ev = self.plan.evict.get(id(original))
        if ev is not None and self.evict is not None and isinstance(updated, cst.Call):
            value = self.evict(*ev)
            return add_call_kwargs(updated, {"eviction_policy": value}) if value is not None else updated
        loop_key = self.plan.loops.get(id(original))
        if loop_key is not None and isinstance(updated, cst.For):
            stages = self.leaf(loop_key, None)
            if stages is None:
                return updated
            args = [cst.Arg(a.value) for a in updated.iter.args if a.keyword is None]
            call = cst.Call(func=cst.parse_expression(self.range_fn),
                            args=[*args, cst.Arg(stages, keyword=cst.Name("num_stages"),
                                                 equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                                       whitespace_after=cst.SimpleWhitespace("")))])
            return updated.with_changes(iter=call)
        pairs = self.plan.autotune.get(id(original))
        if pairs is not None and self.pinned is not None:
            one = _configs_node(pairs, self.pinned)
            if self.unread_test is not None and id(original) in self.plan.unread:   # no config 0 to run: the
                return cst.IfExp(test=self.unread_test(pairs[0][1]), body=one, orelse=updated)   # author's list
            return one
        key = self.plan.wrap.get(id(original))
        if key is not None and isinstance(updated, cst.BaseExpression):
            return self.leaf(key, updated)
        adds = {p: k for p, k in (self.plan.add.get(id(original)) or {}).items()
                if self.only is None or k in self.only}   # a configuration's source touches only what it changes
        if adds and isinstance(updated, cst.Call):
            vals = {p: self.leaf(k, cst.Integer(str(self.plan.defaults[k]))) for p, k in adds.items()}
            return add_call_kwargs(updated, vals)
        return updated


def _after_future(module: cst.Module, stmts: list[cst.BaseStatement]) -> cst.Module:
    body = list(module.body)
    at = 0
    for i, st in enumerate(body):
        if isinstance(st, cst.SimpleStatementLine) and any(
                isinstance(b, cst.ImportFrom) and b.module is not None and dotted(b.module) == "__future__"
                for b in st.body):
            at = i + 1
    if at == 0 and body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        at = 1
    body[at:at] = stmts
    return module.with_changes(body=body)


def instrument(source: str) -> str:
    """The source with every knob read through ``tritondx.tools.tune.knob`` (the tune job's configurations)."""
    space, plan, module = _analyse(source)
    first = {k.key: k.value for k in space.knobs}

    loop_names = {key: LOOP_CONST.format(i) for i, key in enumerate(plan.loops.values())}

    def leaf(key: str, expr: cst.BaseExpression | None) -> cst.BaseExpression:
        if key in loop_names:
            return cst.Name(loop_names[key])
        return cst.Call(func=cst.Name(KNOB_FN), args=[cst.Arg(cst.SimpleString(repr(key))), cst.Arg(expr)])

    def knob_read(key: str) -> str:   # the job sets a hot kernel's to the autotuner's pick; a cold one runs config 0
        return f"{KNOB_FN}({key!r}, {first.get(key)!r})"

    def is_set(key: str) -> cst.BaseExpression:
        return cst.parse_expression(f"{KNOB_SET_FN}({key!r})")

    evict_keys = list(dict.fromkeys(k for k, _ in plan.evict.values()))
    evict_names = {(key, pol): EVICT_CONST.format(i, pol.split("_")[1])
                   for i, key in enumerate(evict_keys) for pol in ("evict_first", "evict_last")}

    def evict(key: str, policy: str) -> cst.BaseExpression:
        return cst.Name(evict_names[(key, policy)])

    out = module.visit(_Rewrite(plan, leaf, knob_read, range_fn="_tdx_tl.range", unread_test=is_set, evict=evict))
    stmts = [cst.parse_statement(f"from tritondx.tools.tune.knob import knob as {KNOB_FN}, is_set as {KNOB_SET_FN}\n")]
    if loop_names or evict_names:
        stmts.append(cst.parse_statement("import triton.language as _tdx_tl\n"))
        stmts += [cst.parse_statement(f"{name} = _tdx_tl.constexpr({KNOB_FN}({key!r}, 0) or None)\n")
                  for key, name in loop_names.items()]
        stmts += [cst.parse_statement(f"{name} = _tdx_tl.constexpr({pol!r} if {KNOB_FN}({key!r}, 0) else '')\n")
                  for (key, pol), name in evict_names.items()]
    return _after_future(out, stmts).code


def emit(source: str, config: dict[str, int], launched: dict[str, int | None] | None = None,
         launches: list[dict] | None = None) -> str:
    """The readable source of one configuration: ``config`` maps a knob's key to its power-of-two exponent (scale
    knobs) or value (set knobs); each is written where the value is defined. An autotuned kernel touched by the
    configuration gets one config: ``config``'s values over the launched pick (``launched``); one left untouched
    keeps its autotuner. ``launches``: the job's recorded launches (eviction hints only in the arms they take)."""
    space, plan, module = _analyse(source, launches)
    how = {k.key: k.how for k in space.knobs}
    touched = {id_: pairs for id_, pairs in plan.autotune.items() if any(k in config for _, k in pairs)}
    plan.autotune = touched
    # a module binding ``max`` (FlagGems' launcher): ``max(v, 1)`` called it (H100 batch_w of 2026-12-07), ``import
    # builtins`` the verifier rejects (batch_x); a tile is a non-negative int, so ``(v or 1)`` is the same value
    at_least_1 = ("({} or 1)" if "max" in module_names(module) else "max({}, 1)").format

    def pinned(key: str) -> str:
        v = config.get(key, (launched or {}).get(key))
        if v is None:
            raise ValueError(f"no launched value for {key}: the autotuned kernel cannot be pinned")
        return repr(v) if isinstance(v, bool) else str(int(v))

    def leaf(key: str, expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
        if key not in config:
            return expr
        v = int(config[key])
        if key in plan.loops.values():
            return cst.Integer(str(v)) if v > 0 else None
        if how[key] == "set":
            return cst.Integer(str(v))
        if v == 0:
            return expr
        if how[key] == "split":   # knob.split: a divisor of the launched count, so the shares still tile the work
            inner = code_of(expr)
            inner = inner if isinstance(expr, (cst.Name, cst.Call, cst.Attribute, cst.Subscript, cst.Integer)) \
                else f"({inner})"
            return cst.parse_expression(f"math.gcd({inner}, {at_least_1(f'{inner} >> {-v}')})")
        if isinstance(expr, cst.Integer):
            base = int(expr.value, 0)
            return cst.Integer(str(max(1, base << v if v > 0 else base >> -v)))
        inner = code_of(expr)
        inner = inner if isinstance(expr, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)) else f"({inner})"
        return cst.parse_expression(f"{inner} * {1 << v}" if v > 0 else at_least_1(f"{inner} // {1 << -v}"))

    def evict(key: str, policy: str) -> cst.BaseExpression | None:
        return cst.SimpleString(f'"{policy}"') if config.get(key) else None

    out = module.visit(_Rewrite(plan, leaf, pinned, only=set(config), range_fn=_language_alias(module) + ".range",
                                evict=evict))
    if any(how.get(k) == "split" and v for k, v in config.items()) and not _imports_math(out):
        out = _after_future(out, [cst.parse_statement("import math\n")])
    return out.code


def _imports_math(module: cst.Module) -> bool:
    """``import math`` at the module's top level (the name ``math`` bound to the module)."""
    return any(isinstance(st, cst.SimpleStatementLine) and any(
        isinstance(b, cst.Import) and any(dotted(a.name) == "math" and a.asname is None for a in b.names)
        for b in st.body) for st in module.body)


def _language_alias(module: cst.Module) -> str:
    """The name the source binds ``triton.language`` to (``tl`` where it says ``import triton.language as tl``)."""
    for st in module.body:
        if isinstance(st, cst.SimpleStatementLine):
            for b in st.body:
                if isinstance(b, cst.Import):
                    for a in b.names:
                        if dotted(a.name) == "triton.language":
                            return a.asname.name.value if a.asname else "triton.language"
                if isinstance(b, cst.ImportFrom) and b.module is not None and dotted(b.module) == "triton" \
                        and not isinstance(b.names, cst.ImportStar):
                    for a in b.names:
                        if a.name.value == "language":
                            return a.asname.name.value if a.asname else "language"
    return "triton.language"


def describe(space: Space, config: dict[str, int], values: dict[str, int] | None = None) -> str:
    """``BLOCK_M 128->1, num_warps 4->8`` (``values``: each knob's value as launched, where the source has none)."""
    parts = []
    for k in space.knobs:
        if k.key not in config:
            continue
        v = int(config[k.key])
        cur = (values or {}).get(k.key, k.value)
        label = k.key.split(".", 1)[1]
        if k.kind == "loop":
            if v:
                parts.append(f"{k.where.split(':', 1)[0]} pipelined in {v} stages")
            continue
        if k.kind == "evict":
            if v:
                parts.append(f"{k.key.split('.', 1)[0]}'s loads with eviction hints")
            continue
        if k.how == "set":
            if cur is not None and v == cur:
                continue
            parts.append(f"{label} {cur if cur is not None else '?'}->{v}")
        elif v and k.how == "split":
            parts.append(f"{label} {cur}->{split(cur, v)}" if cur is not None else f"{label} /{2 ** -v} (a divisor)")
        elif v:
            new = (max(1, cur << v if v > 0 else cur >> -v) if cur is not None else None)
            parts.append(f"{label} {cur}->{new}" if cur is not None else f"{label} x{2.0 ** v:g}")
    return ", ".join(parts) or "as launched"


def launch_shape(source: str) -> tuple:
    """What decides a task's launch space, without the kernels' bodies: each launched kernel's parameters and
    decorators (an autotuner's configs), and the host code that launches them (grids, blocks, options). Two sources
    of one shape have the same knobs at the same values: a rewrite that changed only a kernel's body (``cheap_math``)
    has its parent's launch space, which the parent's search covered (``agents/tuner.py`` ``tune_candidates``)."""
    module = cst.parse_module(source)
    jit = jit_functions(module)
    launched = sorted({s.kernel for _, s in host_launch_sites(module)})
    kernels = tuple((k, tuple(param_names(jit[k])), tuple(code_of(d) for d in jit[k].decorators)) for k in launched)
    host = tuple(code_of(s) for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value not in jit)
    return kernels, host
