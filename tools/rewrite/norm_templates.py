"""Row-normalization templates for fuse_passes: LayerNorm, RMSNorm, and both with a fused residual add.

The template is chosen from what ``reference`` computes (see ``refmatch``), never from the kernels:

    layer_norm(X, (N,), w, b, eps)                          -> LayerNorm
    X * rsqrt(mean(X^2, -1) + eps) * w    (or rms_norm)     -> RMSNorm
    X * rsqrt(...) , ((X - mean) * rstd) * w + b (manual)   -> the same
    X = (x + r).to(x.dtype) ; returning X as well           -> residual add fused, h stored

Semantics kept: eps (the reference's literal or module constant), affine weight/bias present or
not, statistics in fp32 on the value the reference normalizes (the rounded residual sum), output
cast to the dtype the reference casts to, the outputs in the reference's order.

Two kernels are emitted: rows held in registers (several rows per program when N is small) for
N <= MAX_FUSED, and for longer rows a loop kernel with one-pass statistics (Chan's parallel
Welford merge per block for LayerNorm, sum of squares for RMSNorm) and one normalizing pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.rewrite.refmatch import factors, reference_term, strip_f32, term_src
from tritondx.tools.rewrite.taskinfo import task_info
from tritondx.tools.rewrite.templates import apply_template, template


@dataclass
class NormSpec:
    kind: str                  # "layer" or "rms"
    x: str                     # input normalized (or the residual's first operand)
    residual: str | None       # second operand of the fused add
    weight: str | None
    bias: str | None
    eps: str                   # source of eps: a literal or a module constant
    out_dtype_of: str          # output dtype = this input's dtype
    outputs: list[str]         # "out" / "h", in the reference's order
    h_dtype_of: str | None = None


def _input(t) -> str | None:
    return t[1] if t[0] == "in" else None


def _residual(t) -> tuple[str, str, str] | None:
    """(x, r, dtype-of) for ("cast", ("add", x, r), x)."""
    if t[0] == "cast" and t[1][0] == "add":
        a, b = _input(t[1][1]), _input(t[1][2])
        if a and b:
            return a, b, t[2]
    return None


def _base(t) -> tuple[str, str | None, str | None] | None:
    """The normalized value: an input, or a rounded residual sum. (x, residual, h dtype-of)."""
    if _input(t):
        return t[1], None, None
    r = _residual(t)
    if r:
        return r[0], r[1], r[2]
    return None


def _opt_input(t) -> tuple[bool, str | None]:
    """(ok, name): an input, or the literal None."""
    if t[0] == "const" and t[1] is None:
        return True, None
    name = _input(t)
    return (name is not None), name


def _match_rstd(t, base) -> str | None:
    """rsqrt(mean(base^2) + eps) or 1/sqrt(...): returns eps source."""
    inner = None
    if t[0] == "rsqrt":
        inner = t[1]
    elif t[0] == "div" and t[1] == ("const", 1.0) and t[2][0] == "sqrt":
        inner = t[2][1]
    if inner is None or inner[0] != "add":
        return None
    ms, eps = inner[1], inner[2]
    if ms[0] != "mean":
        ms, eps = eps, ms
    if ms[0] != "mean":
        return None
    sq = ms[1]
    if not ((sq[0] == "pow" and sq[1] == base and sq[2] == ("const", 2)) or
            (sq[0] == "mul" and sq[1] == base and sq[2] == base)):
        return None
    return term_src(eps)


def _match_out(t) -> tuple[str, tuple, NormSpec | None] | None:
    """The normalized output term -> a partial NormSpec (outputs filled by the caller)."""
    if t[0] != "cast":
        return None
    out_dtype_of, body = t[2], t[1]
    if body[0] == "layer_norm":
        base = _base(body[1])
        ok_w, w = _opt_input(body[2])
        ok_b, b = _opt_input(body[3])
        eps = term_src(body[4])
        if not base or not ok_w or not ok_b or eps is None:
            return None
        return "layer", body[1], NormSpec("layer", base[0], base[1], w, b, eps, out_dtype_of, [], base[2])
    if body[0] == "rms_norm":
        base = _base(body[1])
        ok_w, w = _opt_input(body[2])
        eps = term_src(body[3])
        if not base or not ok_w or eps is None:
            return None
        return "rms", body[1], NormSpec("rms", base[0], base[1], w, None, eps, out_dtype_of, [], base[2])
    if body[0] == "mul":
        fs = factors(body)
        for cand in fs:
            base = _base(cand)
            if not base:
                continue
            rest = list(fs)
            rest.remove(cand)
            rstd = [f for f in rest if _match_rstd(f, cand)]
            if len(rstd) != 1:
                continue
            eps = _match_rstd(rstd[0], cand)
            rest.remove(rstd[0])
            if len(rest) > 1 or (rest and not _input(rest[0])):
                continue
            w = _input(rest[0]) if rest else None
            return "rms", cand, NormSpec("rms", base[0], base[1], w, None, eps, out_dtype_of, [], base[2])
    return None


def norm_spec(source: str) -> NormSpec | None:
    ref = reference_term(source)
    if ref is None:
        return None
    result = strip_f32(ref.result)
    outs = list(result[1:]) if result[0] == "tuple" else [result]
    spec = None
    base_term = None
    kinds: list[str] = []
    for o in outs:
        m = _match_out(o)
        if m and spec is None:
            _, base_term, spec = m
            kinds.append("out")
        elif _residual(o):
            kinds.append("h")
        else:
            return None
    if spec is None:
        return None
    if "h" in kinds:
        h_terms = [o for o, k in zip(outs, kinds) if k == "h"]
        if len(h_terms) != 1 or spec.residual is None or h_terms[0] != base_term:
            return None
    if spec.out_dtype_of not in ref.params:
        return None
    spec.outputs = kinds
    info = task_info(source)
    params = info.launch_params()
    if params is None or params != ref.params:
        return None
    return spec


# ---------------------------------------------------------------------------------------------
# code generation
# ---------------------------------------------------------------------------------------------

def _kernel_params(s: NormSpec) -> list[str]:
    p = ["x_ptr"]
    if s.residual:
        p.append("r_ptr")
    if s.weight:
        p.append("w_ptr")
    if s.bias:
        p.append("b_ptr")
    if s.residual:
        p.append("h_ptr")
    p += ["out_ptr", "M", "N", "stride_x"]
    if s.residual:
        p += ["stride_r", "stride_h"]
    p += ["stride_o", "eps"]
    return p


def _rows_kernel(s: NormSpec) -> str:
    store_h = "h" in s.outputs
    lines = [
        "@triton.jit",
        (f"def _tdx_{s.kind}norm_rows_kernel({', '.join(_kernel_params(s))}, "
         "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):"),
        "    # BLOCK_M whole rows per program, held in registers: x is read once, out written once",
        "    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    cols = tl.arange(0, BLOCK_N)",
        "    col_mask = cols < N",
        "    mask = (rows < M)[:, None] & col_mask[None, :]",
        "    rows = rows.to(tl.int64)",
        "    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)",
    ]
    if s.residual:
        lines += [
            "    r = tl.load(r_ptr + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0).to(tl.float32)",
            "    h = (x + r).to(h_ptr.dtype.element_ty)  # rounded like the reference's h",
        ]
        if store_h:
            lines.append("    tl.store(h_ptr + rows[:, None] * stride_h + cols[None, :], h, mask=mask)")
        lines.append("    x = h.to(tl.float32)")
    if s.kind == "layer":
        lines += [
            "    mean = tl.sum(x, axis=1) / N",
            "    d = tl.where(mask, x - mean[:, None], 0.0)",
            "    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)",
            "    y = d * rstd[:, None]",
        ]
    else:
        lines += [
            "    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)",
            "    y = x * rstd[:, None]",
        ]
    if s.weight:
        lines.append("    y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]")
    if s.bias:
        lines.append("    y = y + tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]")
    lines.append("    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], "
                 "y.to(out_ptr.dtype.element_ty), mask=mask)")
    return "\n".join(lines) + "\n"


def _loop_kernel(s: NormSpec) -> str:
    lines = [
        "@triton.jit",
        f"def _tdx_{s.kind}norm_loop_kernel({', '.join(_kernel_params(s))}, BLOCK_N: tl.constexpr):",
        "    # rows too long for registers: one-pass statistics, then one normalizing pass",
        "    row = tl.program_id(0).to(tl.int64)",
    ]
    load_x = ["        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)"]
    if s.residual:
        load_x += ["        r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)",
                   "        h = (x + r).to(h_ptr.dtype.element_ty)",
                   "        tl.store(h_ptr + row * stride_h + cols, h, mask=mask)",
                   "        x = h.to(tl.float32)"]
    if s.kind == "layer":
        lines += ["    n_a = 0.0", "    mean_a = 0.0", "    m2_a = 0.0"]
    else:
        lines += ["    ss = 0.0"]
    lines += ["    for start in range(0, N, BLOCK_N):",
              "        cols = start + tl.arange(0, BLOCK_N)",
              "        mask = cols < N"] + load_x
    if s.kind == "layer":
        lines += [
            "        n_b = tl.minimum(N - start, BLOCK_N).to(tl.float32)",
            "        mean_b = tl.sum(x, axis=0) / n_b",
            "        d = tl.where(mask, x - mean_b, 0.0)",
            "        m2_b = tl.sum(d * d, axis=0)",
            "        n_ab = n_a + n_b",
            "        delta = mean_b - mean_a",
            "        mean_a = mean_a + delta * (n_b / n_ab)",
            "        m2_a = m2_a + m2_b + delta * delta * (n_a * n_b / n_ab)",
            "        n_a = n_ab",
            "    mean = mean_a",
            "    rstd = 1.0 / tl.sqrt(m2_a / N + eps)",
        ]
    else:
        lines += ["        ss += tl.sum(x * x, axis=0)",
                  "    rstd = tl.rsqrt(ss / N + eps)"]
    lines += ["    for start in range(0, N, BLOCK_N):",
              "        cols = start + tl.arange(0, BLOCK_N)",
              "        mask = cols < N"]
    if s.residual and "h" in s.outputs:
        lines.append("        x = tl.load(h_ptr + row * stride_h + cols, mask=mask, other=0.0).to(tl.float32)")
    else:
        lines += load_x[:1]
        if s.residual:
            lines += ["        r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)",
                      "        x = (x + r).to(h_ptr.dtype.element_ty).to(tl.float32)"]
    lines.append("        y = (x - mean) * rstd" if s.kind == "layer" else "        y = x * rstd")
    if s.weight:
        lines.append("        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
    if s.bias:
        lines.append("        y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
    lines.append("        tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)")
    return "\n".join(lines) + "\n"


def _launcher(s: NormSpec, params: list[str], max_fused: int, row_elems: int, max_warps: int) -> str:
    x, r = s.x, s.residual
    L = [f"def launch({', '.join(params)}):",
         f"    N = {x}.shape[-1]",
         f"    x2 = {x}.reshape(-1, N)",
         "    M = x2.shape[0]",
         f"    out = torch.empty(x2.shape, device={x}.device, dtype={s.out_dtype_of}.dtype)"]
    args = ["x2"]
    if r:
        L += [f"    r2 = {r}.reshape(-1, N)",
              f"    h = torch.empty(x2.shape, device={x}.device, dtype={s.h_dtype_of or x}.dtype)"]
        args.append("r2")
    if s.weight:
        args.append(s.weight)
    if s.bias:
        args.append(s.bias)
    if r:
        args.append("h")
    args += ["out", "M", "N", "x2.stride(0)"]
    if r:
        args += ["r2.stride(0)", "h.stride(0)"]
    args += ["out.stride(0)", s.eps]
    a = ", ".join(args)
    L += ["    BLOCK_N = triton.next_power_of_2(N)",
          f"    if BLOCK_N <= {max_fused}:",
          f"        BLOCK_M = max(1, min(16, {row_elems} // BLOCK_N))",
          "        elems = BLOCK_M * BLOCK_N",
          # the variant's warp cap decided here, not left in the candidate as a constant test
          ("        num_warps = 4 if elems <= 2048 else 8" if max_warps <= 8 else
           f"        num_warps = 4 if elems <= 2048 else 8 if elems <= 8192 else {max_warps}"),
          f"        _tdx_{s.kind}norm_rows_kernel[(triton.cdiv(M, BLOCK_M),)]({a}, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,",
          "                                              num_warps=num_warps)",
          "    else:",
          f"        _tdx_{s.kind}norm_loop_kernel[(M,)]({a}, BLOCK_N=4096, num_warps=8)"]
    rets = []
    for o in s.outputs:
        rets.append(f"out.reshape({x}.shape)" if o == "out" else f"h.reshape({x}.shape)")
    L.append(f"    return {rets[0]}" if len(rets) == 1 else f"    return {', '.join(rets)}")
    return "\n".join(L) + "\n"


def norm_code(s: NormSpec, params: list[str], max_fused: int = 16384, row_elems: int = 2048,
              max_warps: int = 16) -> str:
    return _rows_kernel(s) + "\n\n" + _loop_kernel(s) + "\n\n" + _launcher(s, params, max_fused, row_elems, max_warps)


VARIANTS = [  # (max_fused, row_elems, max_warps)
    (16384, 2048, 16),
    (8192, 4096, 8),
]


@template
def norm_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = norm_spec(ctx.original.source)
    if spec is None:
        return []
    params = task_info(ctx.original.source).launch_params()
    names = {k.name for k in ctx.spec.kernels}
    label = ("add_" if spec.residual else "") + ("layernorm" if spec.kind == "layer" else "rmsnorm")
    out = []
    for max_fused, row_elems, max_warps in VARIANTS:
        code = norm_code(spec, params, max_fused, row_elems, max_warps)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code),
            {"template": label, "max_fused": max_fused, "row_elems": row_elems, "max_warps": max_warps},
            f"{label} template: rows held in registers up to N={max_fused} ({row_elems // 1024}k elements per "
            f"program, several rows when N is small), one-pass statistics above; eps={spec.eps}, "
            f"outputs {', '.join(spec.outputs)}", motivated_by,
            "one read of each input row and one write per output (plus weight/bias from L2): "
            + ("3 HBM passes -> " if spec.kind == "layer" and not spec.residual else "")
            + "near the copy bandwidth at N <= 16k"))
    return out
