"""A launcher's ``x.abs().max()`` made one pass, in Triton: ``_tdx_absmax(x)``.

``x.abs()`` writes a temporary as large as ``x`` and ``.max()`` reads it back: three passes over the tensor for
what one reduction reads once. Quantizing launchers take their scale this way before the kernel (bitsandbytes'
global int8 transpose: the absolute maximum of the whole input, then a kernel that reads the input once more).
The replacement reads ``x`` once: each program of ``_tdx_absmax_partial`` reduces a block of it to one float32
maximum, and one program of ``_tdx_absmax_final`` reduces those and stores the result in ``x``'s dtype (exact: the
largest absolute value is one of ``x``'s own values). Outputs come from Triton kernels, so the verifier's rule
that a launcher computes nothing in torch holds. Whole-tensor maxima only (``.max()`` / ``.amax()`` with no
dims, of ``x.abs()`` or ``torch.abs(x)``), on ``launch``'s path (``triage_patterns.launch_path``); the flat view
(``x.reshape(-1)``) needs a contiguous ``x`` (a strided one is copied by ``reshape``, which the checks reject).
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.evidence.triage_patterns import abs_reduce_operand, launch_path
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import code_of, expr, is_jit, parse, stmts

HELPER = '''

@triton.jit
def _tdx_absmax_partial(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(part_ptr + pid, tl.max(tl.abs(x.to(tl.float32)), axis=0))


@triton.jit
def _tdx_absmax_final(part_ptr, out_ptr, parts, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc = tl.maximum(acc, tl.load(part_ptr + offs, mask=offs < parts, other=0.0))
    tl.store(out_ptr, tl.max(acc, axis=0).to(out_ptr.dtype.element_ty))


def _tdx_absmax(x):
    """x.abs().max() in one read of x (tritondx absmax_norm)."""
    flat = x.reshape(-1)
    n = flat.numel()
    parts = triton.cdiv(n, 4096)
    part = torch.empty((parts,), device=x.device, dtype=torch.float32)
    out = torch.empty((), device=x.device, dtype=x.dtype)
    _tdx_absmax_partial[(parts,)](flat, part, n, BLOCK=4096)
    _tdx_absmax_final[(1,)](part, out, parts, BLOCK=1024)
    return out
'''


def _operand(node: cst.Call) -> cst.BaseExpression | None:
    """``x`` of a whole-tensor ``x.abs().max()`` / ``.amax()`` / ``torch.abs(x).max()`` (``abs_reduce_operand``)."""
    try:
        tree = ast.parse(code_of(node).strip(), mode="eval").body
    except SyntaxError:
        return None
    if abs_reduce_operand(tree) is None:
        return None
    inner = node.func.value   # the .abs() call
    if inner.args:            # torch.abs(x)
        return inner.args[0].value
    return inner.func.value


class _OnePass(cst.CSTTransformer):
    def __init__(self, path: set[str]) -> None:
        self.done: list[str] = []
        self.path = path

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return not is_jit(node) and node.name.value in self.path   # host code that launch reaches

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not (isinstance(updated.func, cst.Attribute) and updated.func.attr.value in ("max", "amax")):
            return updated
        x = _operand(updated)
        if x is None:
            return updated
        self.done.append(code_of(original).strip())
        return expr(f"_tdx_absmax({code_of(x)})")


def _imports(source: str) -> set[str]:
    names = set()
    for s in ast.parse(source).body:
        if isinstance(s, ast.Import):
            names |= {a.asname or a.name for a in s.names}
    return names


def absmax_source(source: str) -> tuple[str, list[str]] | None:
    """The source with every whole-tensor two-pass absolute maximum on ``launch``'s path made one Triton pass (the
    helper added after the imports), and what was replaced; None when there is none, or the module does not import
    ``torch``, ``triton`` and ``triton.language as tl`` by those names, or already has the helper."""
    if not {"torch", "triton", "tl"} <= _imports(source) or "_tdx_absmax" in source:
        return None
    t = _OnePass(launch_path(ast.parse(source)))
    module = parse(source).visit(t)
    if not t.done:
        return None
    last = max(i for i, s in enumerate(module.body) if isinstance(s, cst.SimpleStatementLine)
               and any(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body))
    body = list(module.body)
    module = module.with_changes(body=body[:last + 1] + stmts(HELPER) + body[last + 1:])
    return module.code, t.done


@rewrite("absmax_norm", "a launcher's x.abs().max() made one pass over x (two small Triton kernels)", priority=12)
def absmax_norm(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("absmax_norm")
    if not motivating:
        return []
    res = absmax_source(ctx.spec.source)
    if res is None:
        return []
    src, done = res
    return [Proposal("absmax_norm", src, {"replaced": done}, "; ".join(done) + " -> _tdx_absmax (one read)",
                     [f.id for f in motivating],
                     "two passes over the tensor fewer per call (no temporary of absolute values written and read)")]
