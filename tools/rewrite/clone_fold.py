"""A launcher's copy folded into the kernel that updates it: read the original, write a fresh buffer.

``launch`` copies a tensor (``p = p.clone()``) so that the kernel's in-place update leaves the caller's input
unchanged; the copy reads and writes the whole tensor once more than the update needs (an optimizer step over fp32
weights and momentum: 144 MB moved where 80 MB do it). The fold (``tools/evidence/inplace.fold_plan`` says where it
holds):

- ``launch``: ``p = p.clone()`` becomes ``p__src = p`` and ``p = torch.empty_like(p)`` (the same layout rule);
- each host function on the way to the kernel takes ``p__src`` (keyword-only) and hands it on by keyword;
- the kernel takes ``p_ptr__src`` right after ``p_ptr``; every pointer it computes from ``p_ptr`` gets a twin
  computed the same way from ``p_ptr__src``, and its loads read through the twins; its stores are unchanged, but
  for a store whose mask reads memory (the plan's ``GuardedStore``): ``tl.store(A, V, mask=M)`` becomes
  ``tl.store(A, tl.where(M, V, tl.load(A__src, mask=B)), mask=B)``, ``B`` the mask's bounds, so that what ``M``
  skips inside the bounds holds the source's value as the copy did (any temporary ``B`` needs is added before the
  statement that bound its names).

The fresh buffer holds only what the kernel stores: an element it leaves unwritten is poisoned while the verifier
runs the candidate and fails its checks.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import PositionProvider
from tritondx.tools.evidence.inplace import SRC, FoldPlan, GuardedStore, clone_of, derived_names, fold_plan
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import code_of, dotted, expr, parse, stmt


class _Rename(cst.CSTTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=updated.value + SRC) if updated.value in self.names else updated


def _twin(node: cst.CSTNode, names: set[str]) -> cst.CSTNode:
    return node.visit(_Rename(names))


class _Fold(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, plan: FoldPlan, derived: dict[str, set[str]]) -> None:
        self.plan = plan
        self.derived = derived          # kernel -> pointer names (parameters and what is computed from them)
        self.stack: list[str] = []      # the functions being visited, outermost first (the plan names those)

    @property
    def fn(self) -> str | None:
        return self.stack[0] if self.stack else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.stack.append(node.name.value)
        return True

    # -- host side ----------------------------------------------------------------------------------------------
    def _call_args(self, call: cst.Call, callee: str) -> cst.Call:
        pairs = self.plan.calls.get((self.fn, callee))
        if pairs:
            given = {code_of(a.value).strip() for a in call.args}
            extra = [cst.Arg(keyword=cst.Name(p + SRC), value=cst.Name(n + SRC), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
                     for p, n in pairs if n in given]
            return _with_args(call, list(call.args), extra)
        return call

    def _launch_args(self, call: cst.Call, kernel: str) -> cst.Call:
        kas = [ka for ka in self.plan.launches if ka.host == self.fn and ka.kernel == kernel]
        if not kas:
            return call
        args = list(call.args)
        positional = [a for a in args if a.keyword is None]
        keywords = [a for a in args if a.keyword is not None]
        extra = []
        for ka in sorted(kas, key=lambda k: -(k.position if k.position is not None else -1)):
            src = ka.name + SRC
            if ka.position is not None:
                prev = positional[ka.position]
                positional.insert(ka.position + 1, cst.Arg(value=expr(src), comma=prev.comma))
            else:
                extra.append(cst.Arg(keyword=cst.Name(ka.param + SRC), value=expr(src), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
        return _with_args(call, positional + keywords, extra)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.fn in self.plan.kernels:       # a kernel's loads read the source
            if dotted(updated.func) == "tl.load" and updated.args:
                first = updated.args[0]
                return updated.with_changes(args=[first.with_changes(value=_twin(first.value, self.derived[self.fn])),
                                                  *updated.args[1:]])
            return updated
        func = updated.func
        if isinstance(func, cst.Subscript) and dotted(func.value) in self.plan.kernels:
            return self._launch_args(updated, dotted(func.value))
        if isinstance(func, cst.Name):
            return self._call_args(updated, func.value)
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if self.fn == "launch" and len(updated.body) == 1:
            try:
                x = clone_of(ast.parse(code_of(updated).strip()).body[0])
            except SyntaxError:
                return updated
            if x in self.plan.roots:
                return cst.FlattenSentinel([updated.with_changes(body=[stmt(f"{x}{SRC} = {x}").body[0]]),
                                            updated.with_changes(body=[stmt(f"{x} = torch.empty_like({x})").body[0]],
                                                                 leading_lines=[])])
        if self.fn in self.plan.kernels:
            return self._kernel_line(original, updated)
        return updated

    def _kernel_line(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        """A kernel's line: the plan's temporaries before it, its guarded store rewritten, a pointer's twin after."""
        line = self.get_metadata(PositionProvider, original).start.line
        guards = self.plan.guards.get(self.fn, [])
        out = [stmt(t) for g in guards for at, t in g.temps if at == line]
        guard = next((g for g in guards if g.line == line), None)
        out.append(self._guarded(updated, guard) if guard else updated)
        names = self.derived[self.fn]
        if len(updated.body) == 1 and isinstance(updated.body[0], (cst.Assign, cst.AugAssign)):
            s = updated.body[0]
            targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]
            if all(isinstance(t, cst.Name) and t.value in names for t in targets):
                out.append(_twin(updated, names))
        if len(out) == 1:
            return out[0]
        return cst.FlattenSentinel([out[0].with_changes(leading_lines=updated.leading_lines),
                                    *(o.with_changes(leading_lines=[]) for o in out[1:])])

    def _guarded(self, line: cst.SimpleStatementLine, guard: GuardedStore) -> cst.SimpleStatementLine:
        """``tl.store(A, V, mask=M, ...)`` -> ``tl.store(A, tl.where(M, V, tl.load(A__src, mask=B)), mask=B, ...)``."""
        args = list(line.body[0].value.args)
        addr, value = args[0].value, args[1].value
        mask = next(a.value for i, a in enumerate(args)
                    if (a.keyword is None and i == 2) or (a.keyword is not None and a.keyword.value == "mask"))
        rest = "".join(f", {a.keyword.value}={code_of(a.value)}" for a in args[2:]
                       if a.keyword is not None and a.keyword.value != "mask")
        src = code_of(_twin(addr, self.derived[self.fn]))
        b = guard.bounds
        old = f"tl.load({src}, mask={b})" if b else f"tl.load({src})"
        new = f"tl.store({code_of(addr)}, tl.where({code_of(mask)}, {code_of(value)}, {old})" + \
            (f", mask={b}" if b else "") + rest + ")"
        return line.with_changes(body=[stmt(new).body[0]])

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        outer = len(self.stack) == 1
        self.stack.pop()
        name = updated.name.value
        if not outer:
            return updated
        params = list(updated.params.params)
        if name in self.plan.kernels:
            for ptr in self.plan.kernels[name]:
                i = next(i for i, p in enumerate(params) if p.name.value == ptr)
                params.insert(i + 1, params[i].with_changes(name=cst.Name(ptr + SRC), annotation=None, default=None))
            return updated.with_changes(params=updated.params.with_changes(params=_joined(params)))
        if name in self.plan.hosts:
            new = [cst.Param(cst.Name(p + SRC)) for p in self.plan.hosts[name]]   # keyword-only, required
            ps = updated.params
            star = ps.star_arg if isinstance(ps.star_arg, (cst.Param, cst.ParamStar)) else cst.ParamStar()
            ps = ps.with_changes(params=_joined(params) if ps.params else params, star_arg=star,
                                 kwonly_params=_joined([*ps.kwonly_params, *new]))
            return updated.with_changes(params=ps)
        return updated


def _joined(items: list) -> list:
    """Params or args with a comma after every one but the last (each keeps its own where it had one)."""
    return [x.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if i < len(items) - 1 and x.comma is cst.MaybeSentinel.DEFAULT else x for i, x in enumerate(items)]


def _with_args(call: cst.Call, args: list[cst.Arg], extra: list[cst.Arg]) -> cst.Call:
    return call.with_changes(args=_joined([*args, *extra]))


def fold_source(source: str) -> tuple[str, FoldPlan] | None:
    """The source with ``launch``'s copies folded into their kernels, and the plan; None where ``fold_plan`` finds
    none or the module does not import ``torch`` by that name."""
    tree = ast.parse(source)
    if not any(isinstance(s, ast.Import) and any((a.asname or a.name) == "torch" for a in s.names) for s in tree.body):
        return None
    plan = fold_plan(tree)
    if plan is None:
        return None
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    derived = {k: set().union(*(derived_names(fns[k], p) for p in ps)) for k, ps in plan.kernels.items()}
    return cst.MetadataWrapper(parse(source)).visit(_Fold(plan, derived)).code, plan


@rewrite("clone_fold", "a launcher's copy folded into the kernel that updates it: read the original, write a fresh "
         "buffer", priority=12)
def clone_fold(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("clone_fold")
    if not motivating:
        return []
    res = fold_source(ctx.spec.source)
    if res is None:
        return []
    src, plan = res
    what = ", ".join(f"{r}.clone()" for r in plan.roots)
    kernels = ", ".join(plan.kernels)
    return [Proposal("clone_fold", src, {"roots": plan.roots, "kernels": list(plan.kernels)},
                     f"{what} folded into {kernels}: it reads the originals and writes fresh buffers",
                     [f.id for f in motivating],
                     "one read and one write of each copied tensor fewer per call")]
