"""Templates for matrix products, matched on the reference:

- split_k (its own family): ``(a @ b).to(a.dtype)`` for 2-D a, b, the product's K range split across
  programs when the output has too few tiles to fill the SMs (skinny M, long K): fp32 partial tiles
  then one reduce kernel. SPLIT_K is picked at run time in the launcher from the tile count and the
  SM count (``torch.cuda.get_device_properties(...).multi_processor_count``; 4 under the interpreter).
- flash attention (a fuse_passes template): ``softmax(q @ k^T * scale) @ v`` on (B, H, S, D) inputs,
  non-causal, as one kernel with an online softmax (exp2), tl.dot for QK^T and PV, fp32 accumulators.
"""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.refmatch import reference_term, strip_f32, term_src
from tritondx.tools.rewrite.taskinfo import task_info
from tritondx.tools.rewrite.templates import apply_template, template

# ---------------------------------------------------------------------------------------------
# split-K
# ---------------------------------------------------------------------------------------------

def plain_matmul(source: str) -> tuple[str, str] | None:
    """(a, b) when the reference is ``(a @ b)`` cast to a's dtype (or a bare a @ b) and launch(a, b)."""
    ref = reference_term(source)
    if ref is None or len(ref.params) != 2:
        return None
    t = strip_f32(ref.result)
    a, b = ref.params
    plain = t in (("cast", ("matmul", ("in", a), ("in", b)), a), ("matmul", ("in", a), ("in", b)))
    if plain and task_info(source).launch_params() == [a, b] and "tl.dot" in source:
        return a, b
    return None


SPLITK_KERNELS = '''
@triton.jit
def _tdx_splitk_matmul_kernel(a_ptr, b_ptr, c_ptr, p_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                              stride_cm, stride_cn, K_PER_SPLIT,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              SPLIT_K: tl.constexpr):
    # program (n tile, m tile, k slice): a K_PER_SPLIT slice of the product for one output tile
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < k_hi), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        # fp32 partial tile of slice pid_k; p is a contiguous (SPLIT_K, M, N) buffer
        tl.store(p_ptr + pid_k * M * N + rm[:, None] * N + rn[None, :], acc, mask=mask)


@triton.jit
def _tdx_splitk_reduce_kernel(p_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)
'''

SPLITK_LAUNCH = '''
def launch({a}, {b}):
    M, K = {a}.shape
    _, N = {b}.shape
    c = torch.empty((M, N), device={a}.device, dtype={a}.dtype)
    if M <= 64:
        BLOCK_M = max(16, triton.next_power_of_2(M))
        BLOCK_N, BLOCK_K, num_warps, num_stages = {bn}, {bk}, 4, 4
    else:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 128, 128, 64, 8, 3
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    sms = torch.cuda.get_device_properties({a}.device).multi_processor_count if {a}.is_cuda else 4
    # split K until the grid covers the SMs {waves} times, keeping >= 2 K blocks per slice
    split = 1
    while split < {max_split} and tiles * split < {waves} * sms and K // (2 * split) >= 2 * BLOCK_K:
        split *= 2
    k_per_split = triton.cdiv(triton.cdiv(K, split), BLOCK_K) * BLOCK_K
    split = triton.cdiv(K, k_per_split)
    grid = (triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M), split)
    if split == 1:
        _tdx_splitk_matmul_kernel[grid]({a}, {b}, c, c, M, N, K, {a}.stride(0), {a}.stride(1), {b}.stride(0),
                                        {b}.stride(1), c.stride(0), c.stride(1), k_per_split,
                                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=1,
                                        num_warps=num_warps, num_stages=num_stages)
    else:
        partial = torch.empty((split, M, N), device={a}.device, dtype=torch.float32)
        _tdx_splitk_matmul_kernel[grid]({a}, {b}, c, partial, M, N, K, {a}.stride(0), {a}.stride(1), {b}.stride(0),
                                        {b}.stride(1), c.stride(0), c.stride(1), k_per_split,
                                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=split,
                                        num_warps=num_warps, num_stages=num_stages)
        _tdx_splitk_reduce_kernel[(triton.cdiv(M * N, 1024),)](partial, c, M * N, SPLIT_K=split, BLOCK=1024)
    return c
'''

SPLITK_VARIANTS = [  # (BLOCK_N, BLOCK_K, waves, max split)
    (64, 128, 2, 16),
    (128, 64, 4, 32),
]


@rewrite("split_k", "skinny GEMM: the K range split across programs (fp32 partials + a reduce kernel), "
                    "SPLIT_K picked from the shapes and the SM count at run time", priority=15)
def split_k(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("split_k")
    if not motivating:
        return []
    ab = plain_matmul(ctx.original.source)
    if ab is None or "float16" not in ctx.dtypes and "bfloat16" not in ctx.dtypes and ctx.dtypes:
        return []
    a, b = ab
    names = {k.name for k in ctx.spec.kernels}
    out = []
    for bn, bk, waves, max_split in SPLITK_VARIANTS:
        code = SPLITK_KERNELS + SPLITK_LAUNCH.format(a=a, b=b, bn=bn, bk=bk, waves=waves, max_split=max_split)
        out.append(Proposal(
            "split_k", apply_template(ctx.spec.source, names, code),
            {"BLOCK_N": bn, "BLOCK_K": bk, "waves": waves, "max_split": max_split},
            f"split-K matmul: up to {max_split} K slices chosen so the grid covers the SMs {waves}x, "
            f"BLOCK_N={bn}, BLOCK_K={bk} for M <= 64; fp32 partials reduced by a second kernel",
            [f.id for f in motivating],
            "for skinny M (one row of tiles) the grid grows from N/BLOCK_N programs to ~2-4 waves: B streamed by "
            "all SMs (toward the HBM bandwidth); the partials cost split*M*N*4 bytes, small next to B; "
            "no gain for large M (split stays 1)"))
    return out


# ---------------------------------------------------------------------------------------------
# flash attention
# ---------------------------------------------------------------------------------------------

ATTN_KERNEL = '''
@triton.jit
def _tdx_flash_attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, qk_scale,
                               stride_qh, stride_qs, stride_kh, stride_ks, stride_vh, stride_vs,
                               stride_oh, stride_os,
                               D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               EVEN_N: tl.constexpr, SCALE_POS: tl.constexpr):
    # one program per (BLOCK_M query rows, head): online softmax over key blocks, nothing of size S x S in HBM.
    # Key blocks that lie inside S run unmasked (no select per score); a partial last block (S % BLOCK_N) runs
    # once, masked. The scale is folded into the exp2 argument (one FMA per score) and P @ V accumulates in place.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rn0 = tl.arange(0, BLOCK_N)
    d_ok = rd < D
    q = tl.load(q_ptr + bh * stride_qh + rm[:, None] * stride_qs + rd[None, :],
                mask=(rm[:, None] < S) & d_ok[None, :], other=0.0)
    kt_ptrs = k_ptr + bh * stride_kh + rn0[None, :] * stride_ks + rd[:, None]
    v_ptrs = v_ptr + bh * stride_vh + rn0[:, None] * stride_vs + rd[None, :]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if EVEN_N:
        n_full = S
    else:
        n_full = (S // BLOCK_N) * BLOCK_N
    for start in range(0, n_full, BLOCK_N):
        if BLOCK_D == D:
            kt = tl.load(kt_ptrs + start * stride_ks)
        else:
            kt = tl.load(kt_ptrs + start * stride_ks, mask=d_ok[:, None], other=0.0)
        s = tl.dot(q, kt)
        if SCALE_POS:
            m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
            p = tl.exp2(s * qk_scale - m_new[:, None])
        else:
            s = s * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if BLOCK_D == D:
            v = tl.load(v_ptrs + start * stride_vs)
        else:
            v = tl.load(v_ptrs + start * stride_vs, mask=d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    if not EVEN_N:
        n_ok = (n_full + rn0) < S
        kt = tl.load(kt_ptrs + n_full * stride_ks, mask=n_ok[None, :] & d_ok[:, None], other=0.0)
        s = tl.where(n_ok[None, :], tl.dot(q, kt) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptrs + n_full * stride_vs, mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + bh * stride_oh + rm[:, None] * stride_os + rd[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < S) & d_ok[None, :])
'''

ATTN_LAUNCH = '''
def launch({q}, {k}, {v}):
    B, H, S, D = {q}.shape
    q3 = {q}.reshape(B * H, S, D)
    k3 = {k}.reshape(B * H, S, D)
    v3 = {v}.reshape(B * H, S, D)
    out = torch.empty((B * H, S, D), device={q}.device, dtype={q}.dtype)
    sm_scale = {scale}
    BLOCK_D = max(16, triton.next_power_of_2(D))
    BLOCK_M, BLOCK_N = {bm}, {bn}
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    _tdx_flash_attn_fwd_kernel[grid](q3, k3, v3, out, S, sm_scale * 1.4426950408889634,
                                     q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1),
                                     v3.stride(0), v3.stride(1), out.stride(0), out.stride(1),
                                     D=D, BLOCK_D=BLOCK_D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                     EVEN_N=S % BLOCK_N == 0, SCALE_POS=sm_scale > 0,
                                     num_warps={warps}, num_stages={stages})
    return out.reshape(B, H, S, D)
'''

# (BLOCK_M, BLOCK_N, num_warps, num_stages). The first was the best measured on the H200 (2026-11-30 suite run);
# 128x128 with 8 warps halves the per-block softmax bookkeeping per score (Triton's Hopper tutorial configs).
# launch_config searches the rest (ATTN_SPACE) once a template is in place.
ATTN_VARIANTS = [(128, 64, 8, 3), (128, 128, 8, 3)]


def _last_dim_of(t, q: str) -> bool:
    return t[0] == "size" and t[1].replace(" ", "") in (f"{q}.shape[-1]", f"{q}.size(-1)")


def attention_spec(source: str) -> tuple[str, str, str, str] | None:
    """(q, k, v, sm_scale source in terms of D) for softmax(q @ k^T * scale) @ v, cast to q's dtype."""
    ref = reference_term(source)
    if ref is None or len(ref.params) != 3:
        return None
    q, k, v = ref.params
    t = strip_f32(ref.result)
    if t[0] == "cast" and t[2] == q:
        t = t[1]
    if t[0] != "matmul" or t[2] != ("in", v) or t[1][0] != "softmax":
        return None
    scores = t[1][1]
    qk = ("matmul", ("in", q), ("transpose", ("in", k)))
    scale = None
    if scores == qk:
        scale = "D ** -0.5"
    elif scores[0] == "div" and scores[1] == qk:
        den = scores[2]
        if den[0] == "pow" and _last_dim_of(den[1], q) and den[2] == ("const", 0.5) or den[0] == "sqrt" and _last_dim_of(den[1], q):
            scale = "1.0 / D ** 0.5"
        elif term_src(den):
            scale = f"1.0 / {term_src(den)}"
    elif scores[0] == "mul" and (scores[1] == qk or scores[2] == qk):
        other = scores[2] if scores[1] == qk else scores[1]
        if term_src(other):
            scale = term_src(other)
        elif other[0] == "pow" and _last_dim_of(other[1], q) and other[2] == ("const", -0.5):
            scale = "D ** -0.5"
    if scale is None or task_info(source).launch_params() != [q, k, v]:
        return None
    return q, k, v, scale


@template
def attention_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = attention_spec(ctx.original.source)
    if spec is None:
        return []
    q, k, v, scale = spec
    names = {kk.name for kk in ctx.spec.kernels}
    out = []
    for bm, bn, warps, stages in ATTN_VARIANTS:
        code = ATTN_KERNEL + ATTN_LAUNCH.format(q=q, k=k, v=v, scale=scale, bm=bm, bn=bn, warps=warps,
                                                stages=stages)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code),
            {"template": "flash_attention", "BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps},
            f"flash-attention template: one kernel, online softmax (exp2), QK^T and PV on tl.dot with fp32 "
            f"accumulators, {bm}x{bn} blocks; scale {scale}", motivated_by,
            "no (B*H, S, S) score/probability tensors in HBM: traffic from O(S^2) to O(S*D) per head and one "
            "launch; compute-bound on tensor cores for long S"))
    return out


# ---------------------------------------------------------------------------------------------
# grouped GEMM (contiguous row segments, one weight per segment): one launch over every group's tiles
# ---------------------------------------------------------------------------------------------

def _strip_float(node: ast.AST) -> str:
    """Source with .float() calls removed (the template accumulates in fp32 anyway)."""
    class T(ast.NodeTransformer):
        def visit_Call(self, n: ast.Call):
            self.generic_visit(n)
            if isinstance(n.func, ast.Attribute) and n.func.attr == "float" and not n.args:
                return n.func.value
            return n
    return ast.unparse(T().visit(ast.parse(ast.unparse(node))))


def grouped_gemm_spec(source: str) -> tuple[str, str, str] | None:
    """(x, w, sizes) for a reference of the form

        outs = []; start = 0
        for g, m in enumerate(sizes.tolist()):
            outs.append(x[start:start + m] @ w[g]); start += m
        return torch.cat(outs, dim=0).to(x.dtype)
    """
    info = task_info(source)
    ref = info.reference
    if ref is None or len(ref.args.args) != 3 or info.launch_params() != [a.arg for a in ref.args.args]:
        return None
    x, w, sizes = (a.arg for a in ref.args.args)
    body = [st for st in ref.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(body) != 4:
        return None
    init1, init2, loop, ret = body
    inits = {ast.unparse(init1), ast.unparse(init2)}
    if not isinstance(loop, ast.For) or not isinstance(ret, ast.Return):
        return None
    lists = [s.split(" = ")[0] for s in inits if s.endswith("= []")]
    starts = [s.split(" = ")[0] for s in inits if s.endswith("= 0")]
    if len(lists) != 1 or len(starts) != 1:
        return None
    outs, start = lists[0], starts[0]
    if ast.unparse(loop.iter) != f"enumerate({sizes}.tolist())" or not isinstance(loop.target, ast.Tuple):
        return None
    g, m = (e.id for e in loop.target.elts)
    want = {f"{outs}.append({x}[{start}:{start} + {m}] @ {w}[{g}])", f"{start} += {m}"}
    if {_strip_float(s) for s in loop.body} != want or len(loop.body) != 2:
        return None
    if _strip_float(ret.value) not in (f"torch.cat({outs}, dim=0).to({x}.dtype)", f"torch.cat({outs}, dim=0)",
                                       f"torch.cat({outs}).to({x}.dtype)", f"torch.cat({outs})"):
        return None
    return x, w, sizes


GROUPED_KERNEL = '''
@triton.jit
def _tdx_grouped_gemm_kernel(x_ptr, w_ptr, out_ptr, sizes_ptr, G, N, K,
                             stride_xm, stride_xk, stride_wg, stride_wk, stride_wn, stride_om, stride_on,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # one launch for every group: program pid finds its group by walking the groups' tile counts
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    row0 = 0
    tile0 = 0
    grp = 0
    m = 0
    g_row0 = 0
    g_tile0 = 0
    for g in range(0, G):
        m_g = tl.load(sizes_ptr + g)
        t_g = tl.cdiv(m_g, BLOCK_M) * tiles_n
        hit = (pid >= tile0) & (pid < tile0 + t_g)
        grp = tl.where(hit, g, grp)
        m = tl.where(hit, m_g, m)
        g_row0 = tl.where(hit, row0, g_row0)
        g_tile0 = tl.where(hit, tile0, g_tile0)
        row0 += m_g
        tile0 += t_g
    local = pid - g_tile0
    pid_m = local // tiles_n
    pid_n = local % tiles_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = (g_row0 + rm).to(tl.int64)
    w_base = w_ptr + grp.to(tl.int64) * stride_wg
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rows[:, None] * stride_xm + rk[None, :] * stride_xk,
                    mask=(rm[:, None] < m) & (rk[None, :] < K), other=0.0)
        b = tl.load(w_base + rk[:, None] * stride_wk + rn[None, :] * stride_wn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + rows[:, None] * stride_om + rn[None, :] * stride_on, acc.to(out_ptr.dtype.element_ty),
             mask=(rm[:, None] < m) & (rn[None, :] < N))
'''

GROUPED_LAUNCH = '''
def launch({x}, {w}, {sizes}):
    total_m, K = {x}.shape
    G, _, N = {w}.shape
    out = torch.empty((total_m, N), device={x}.device, dtype={x}.dtype)
    avg_m = max(1, total_m // max(1, G))
    if avg_m >= {big_m}:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 128, 128, 64, 8, 3
    else:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 64, 128, 64, 4, 4
    # the group sizes stay on the device (no host read, no sync): the grid is a bound from the shapes alone,
    # sum_g cdiv(m_g, BLOCK_M) <= cdiv(total_m, BLOCK_M) + G; the programs past the last group's tiles find no
    # group (m = 0) and store nothing
    tiles = (triton.cdiv(total_m, BLOCK_M) + G) * triton.cdiv(N, BLOCK_N)
    _tdx_grouped_gemm_kernel[(tiles,)]({x}, {w}, out, {sizes}, G, N, K, {x}.stride(0), {x}.stride(1),
                                       {w}.stride(0), {w}.stride(1), {w}.stride(2), out.stride(0), out.stride(1),
                                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                       num_warps=num_warps, num_stages=num_stages)
    return out
'''


def grouped_gemm_proposals(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = grouped_gemm_spec(ctx.original.source)
    if spec is None:
        return []
    x, w, sizes = spec
    names = {k.name for k in ctx.spec.kernels}
    out = []
    for big_m in (256, 128):
        code = GROUPED_KERNEL + GROUPED_LAUNCH.format(x=x, w=w, sizes=sizes, big_m=big_m)
        out.append(Proposal(
            "persistent", apply_template(ctx.spec.source, names, code),
            {"template": "grouped_gemm", "big_m_threshold": big_m},
            "grouped GEMM template: one launch over the tiles of every group (each program finds its group "
            f"from the sizes on the device, the grid a bound from the shapes: no host read); 128x128x64 tiles when groups average >= {big_m} rows, else 64x128x64",
            motivated_by,
            "one launch instead of one per group and no per-group tail waves: the gain grows with the number of "
            "small groups (many small GEMMs fill the GPU together); large groups gain from the bigger tiles"))
    return out
