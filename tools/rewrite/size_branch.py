"""Templates behind a size branch whose other side is the original code, unchanged.

A template that is fast only for some sizes (a row that fits in registers) is added as

    def launch(x):
        if x.shape[-1] <= 16384:
            <the template's kernel and launch>
            return ...
        <the original launcher's body, unchanged>

with the original kernels and helpers kept as they are. The verifier needs no check of the fallback side
(tools/verify/plan/branches.py: a side that is the original code path unchanged), so the candidate survives a task
whose checked sizes (sentinels, or all short rows) never reach it; sizes the task does not check run the
original code. The template side is checked like any new code: a task whose checked sizes never reach it
gets the candidate rejected (``unchecked_branch``), as before. These variants are made where the task's shapes
are sentinels (:func:`sizes_derivable`): elsewhere the verifier derives sizes for both sides of the plain
templates' branches.

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


def sizes_derivable(source: str) -> bool:
    """Every listed CHECK_SHAPES entry is a tuple of ints: the verifier derives sizes from them and reaches both
    sides of a size branch within its budget, so the plain template is checkable as it is. A sentinel (``("small",)``)
    maps to sizes the task chooses: nothing can be derived, and the template specializes to what the task checks
    by keeping the original code as its other side."""
    from tritondx.tools.rewrite.taskinfo import task_info
    shapes = task_info(source).shapes("CHECK_SHAPES")
    return bool(shapes) and all(all(isinstance(d, int) and not isinstance(d, bool) for d in s) for s in shapes)


def softmax_fallback_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    if not _softmax_applies(ctx) or sizes_derivable(ctx.original.source):
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


# --------------------------------------------------------------------------------------------------------------
# LayerNorm / RMSNorm (+ residual): the rows-in-registers kernel of norm_templates for rows up to MAX_FUSED,
# the original code above. Warps by arithmetic (a conditional expression would be one more branch to reach).
# --------------------------------------------------------------------------------------------------------------

NORM_MAX_FUSED = 16384


def norm_fallback_code(s, row_elems: int = 2048) -> tuple[str, str, str]:
    """(test, body, kernels) of the norm template's rows path for ``with_original_fallback``."""
    from tritondx.tools.rewrite.norm_templates import _rows_kernel
    x, r = s.x, s.residual
    body = [f"N = {x}.shape[-1]", f"x2 = {x}.reshape(-1, N)", "M = x2.shape[0]",
            f"out = torch.empty(x2.shape, device={x}.device, dtype={s.out_dtype_of}.dtype)"]
    args = ["x2"]
    if r:
        body += [f"r2 = {r}.reshape(-1, N)",
                 f"h = torch.empty(x2.shape, device={x}.device, dtype={s.h_dtype_of or x}.dtype)"]
        args.append("r2")
    args += [a for a in (s.weight, s.bias) if a]
    if r:
        args.append("h")
    args += ["out", "M", "N", "x2.stride(0)"] + (["r2.stride(0)", "h.stride(0)"] if r else [])
    args += ["out.stride(0)", s.eps]
    body += ["BLOCK_N = triton.next_power_of_2(N)", f"BLOCK_M = max(1, min(16, {row_elems} // BLOCK_N))",
             "num_warps = min(16, max(4, BLOCK_M * BLOCK_N // 512))",
             f"_tdx_{s.kind}norm_rows_kernel[(triton.cdiv(M, BLOCK_M),)]({', '.join(args)}, BLOCK_M=BLOCK_M, "
             "BLOCK_N=BLOCK_N, num_warps=num_warps)"]
    rets = [f"out.reshape({x}.shape)" if o == "out" else f"h.reshape({x}.shape)" for o in s.outputs]
    body.append(f"return {', '.join(rets)}")
    return f"triton.next_power_of_2({x}.shape[-1]) <= {NORM_MAX_FUSED}", "\n".join(body) + "\n", _rows_kernel(s)


def norm_fallback_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    from tritondx.tools.rewrite.norm_templates import norm_spec
    from tritondx.tools.rewrite.taskinfo import task_info
    spec = norm_spec(ctx.original.source)
    if spec is None or task_info(ctx.original.source).launch_params() is None or sizes_derivable(ctx.original.source):
        return []
    test, body, kernels = norm_fallback_code(spec)
    src = with_original_fallback(ctx.original.source, test, body, kernels)
    if src is None:
        return []
    label = ("add_" if spec.residual else "") + ("layernorm" if spec.kind == "layer" else "rmsnorm")
    return [Proposal(
        "fuse_passes", src, {"template": f"{label}_rows_or_original", "max_fused": NORM_MAX_FUSED},
        f"{label} template for rows up to N={NORM_MAX_FUSED}: rows held in registers (several per program when N "
        "is small), one read of each input and one write per output; longer rows run the original code, unchanged "
        "(that side needs no check)", motivated_by,
        "one HBM pass per tensor for the rows the template takes; rows above the limit as fast as before")]


def _register_norm() -> None:
    from tritondx.tools.rewrite.norm_templates import norm_template
    TEMPLATES.insert(TEMPLATES.index(norm_template), norm_fallback_template)


_register_norm()
