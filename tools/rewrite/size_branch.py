"""Templates behind a size branch whose other side is the original code, unchanged.

A template that is fast only for some sizes (a row that fits in registers) is added as

    def launch(x):
        if x.shape[-1] <= 16384:
            <the template's kernel and launch>
            return ...
        <the original launcher's body, unchanged>

with the original kernels and helpers kept as they are. The verifier needs no check of the fallback side
(tools/verify/branches.py: a side that is the original code path unchanged), so the candidate survives a task
whose checked sizes (sentinels, or all short rows) never reach it; sizes the task does not check run the
original code. The template side is checked like any new code: a task whose checked sizes never reach it
gets the candidate rejected (``unchecked_branch``), as before.

:func:`with_original_fallback` builds such a candidate for any template; the softmax template here is the
one-program-per-row kernel of ``templates.softmax_template`` (the online kernel for long rows is left to that
template: here long rows keep the original code).
"""

from __future__ import annotations

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.rewrite.cst_util import names_in, parse
from tritondx.tools.rewrite.templates import TEMPLATES, _softmax_applies, softmax_template


def with_original_fallback(original_source: str, test: str, body: str, kernels: str) -> str | None:
    """``original_source`` with ``kernels`` (top-level code) added before ``launch`` and ``launch`` starting with
    ``if <test>: <body>`` (``body`` must return); None when a name the addition defines is taken."""
    module = parse(original_source)
    launch = next((s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "launch"), None)
    if launch is None:
        return None
    new_top = cst.parse_module(kernels).body
    defined = {s.name.value for s in new_top if isinstance(s, cst.FunctionDef)}
    taken = names_in(module) | {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    if defined & taken:
        return None
    branch = cst.parse_module(f"if {test}:\n" + "".join(f"    {ln}\n" if ln else "\n" for ln in body.splitlines())).body
    old = list(launch.body.body)
    head = []
    if old and isinstance(old[0], cst.SimpleStatementLine) and isinstance(old[0].body[0], cst.Expr) and \
            isinstance(old[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        head, old = [old[0]], old[1:]   # the docstring stays first
    new_launch = launch.with_changes(body=launch.body.with_changes(body=head + list(branch) + old))
    out = []
    for s in module.body:
        if s is launch:
            out.extend(new_top)
            out.append(new_launch.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
        else:
            out.append(s)
    return module.with_changes(body=out).code


SOFTMAX_ROW_KERNEL = '''
@triton.jit
def _tdx_softmax_row_kernel(x_ptr, out_ptr, N, sx0, sx1, so0, BLOCK: tl.constexpr):
    # one program per row; the whole row in registers: one read, one write
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sx0 + cols * sx1, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * so0 + cols, (e / s).to(out_ptr.dtype.element_ty), mask=mask)
'''

# warps by arithmetic, not by a conditional expression: a conditional would be one more branch to reach
SOFTMAX_ROW_BODY = '''_tdx_n = {x}.shape[-1]
_tdx_x2 = {x}.reshape(-1, _tdx_n)
_tdx_out = torch.empty((_tdx_x2.shape[0], _tdx_n), device={x}.device, dtype={x}.dtype)
_tdx_block = triton.next_power_of_2(_tdx_n)
_tdx_softmax_row_kernel[(_tdx_x2.shape[0],)](_tdx_x2, _tdx_out, _tdx_n, _tdx_x2.stride(0), _tdx_x2.stride(1),
                                            _tdx_out.stride(0), BLOCK=_tdx_block,
                                            num_warps=min(16, max(4, _tdx_block // 512)))
return _tdx_out.reshape({x}.shape)
'''

#: the longest row the one-program-per-row kernel takes (above it, the original code runs)
SOFTMAX_MAX_ROW = 16384


def softmax_fallback_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    if not _softmax_applies(ctx):
        return []
    import ast
    tree = ast.parse(ctx.original.source)
    launch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch")
    x = launch.args.args[0].arg
    src = with_original_fallback(ctx.original.source, f"{x}.shape[-1] <= {SOFTMAX_MAX_ROW}",
                                 SOFTMAX_ROW_BODY.format(x=x), SOFTMAX_ROW_KERNEL)
    if src is None:
        return []
    return [Proposal(
        "fuse_passes", src, {"template": "softmax_row_or_original", "max_row_block": SOFTMAX_MAX_ROW},
        f"softmax template for rows up to N={SOFTMAX_MAX_ROW}: one program per row held in registers (one read, "
        "one write); longer rows run the original code, unchanged (that side needs no check)", motivated_by,
        "HBM traffic down to one read and one write, and one program per row (the grid fills the device whatever "
        "the original's program count); rows above the limit as fast as before")]


# before the plain softmax template: its fallback side is the original, so it survives sizes the task never checks
TEMPLATES.insert(TEMPLATES.index(softmax_template), softmax_fallback_template)
