"""More fuse_passes templates matched on the reference: top-k over the last dim, GroupNorm (+ activation).

- top-k (``values, indices = torch.topk(x, K, dim=-1)``, largest and sorted): each row is read once,
  a chunk at a time, and merged into a running top-K held in registers: K selections of (largest
  value, lowest index) per chunk over the chunk and the running list (the order of repeated max passes).
- GroupNorm (``act(group_norm(x, G, w, b, eps))`` cast to x's dtype, act in {none, silu, sigmoid, relu,
  gelu}): statistics split across SPLIT programs per group (one pass, Chan-merged count/mean/M2
  partials), a finalize kernel, then a normalize kernel over (n*c, hw blocks) programs with the
  per-channel scale/shift and group statistics loaded once per program instead of per element.
"""

from __future__ import annotations

from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.rewrite.refmatch import reference_term, strip_f32, term_src
from tritondx.tools.rewrite.taskinfo import task_info
from tritondx.tools.rewrite.templates import apply_template, template

# ---------------------------------------------------------------------------------------------
# top-k
# ---------------------------------------------------------------------------------------------

TOPK_KERNEL = '''
@triton.jit
def _tdx_topk_chunked_kernel(x_ptr, val_ptr, idx_ptr, N, stride_x, stride_v, stride_i,
                             K: tl.constexpr, KP: tl.constexpr, CHUNK: tl.constexpr):
    # one read of the row, CHUNK elements at a time, merged into a running top-K held in registers.
    # Order: value descending, then index ascending; each pick is the first element after the previous
    # pick in that order, taken from the chunk or from the running list.
    row = tl.program_id(0).to(tl.int64)
    kk = tl.arange(0, KP)
    run_v = tl.full([KP], float("-inf"), dtype=tl.float32)
    run_i = tl.full([KP], 0, dtype=tl.int32)
    run_ok = tl.full([KP], 0, dtype=tl.int32)
    for start in range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        in_row = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=in_row, other=float("-inf")).to(tl.float32)
        prev_v = float("inf")
        prev_i = -1
        new_v = run_v
        new_i = run_i
        new_ok = run_ok
        for j in tl.static_range(K):
            cand = in_row & ((x < prev_v) | ((x == prev_v) & (cols > prev_i)))
            xv = tl.where(cand, x, float("-inf"))
            bv = tl.max(xv, axis=0)
            bi = tl.min(tl.where(cand & (xv == bv), cols, N), axis=0)
            b_ok = tl.max(cand.to(tl.int32), axis=0)
            rc = (run_ok > 0) & ((run_v < prev_v) | ((run_v == prev_v) & (run_i > prev_i)))
            rv = tl.where(rc, run_v, float("-inf"))
            rbv = tl.max(rv, axis=0)
            rbi = tl.min(tl.where(rc & (rv == rbv), run_i, N), axis=0)
            r_ok = tl.max(rc.to(tl.int32), axis=0)
            take_chunk = (b_ok > 0) & ((r_ok == 0) | (bv > rbv) | ((bv == rbv) & (bi < rbi)))
            pv = tl.where(take_chunk, bv, rbv)
            pi = tl.where(take_chunk, bi, rbi)
            new_v = tl.where(kk == j, pv, new_v)
            new_i = tl.where(kk == j, pi, new_i)
            new_ok = tl.where(kk == j, tl.maximum(b_ok, r_ok), new_ok)
            prev_v = pv
            prev_i = pi
        run_v = new_v
        run_i = new_i
        run_ok = new_ok
    tl.store(val_ptr + row * stride_v + kk, run_v.to(val_ptr.dtype.element_ty), mask=kk < K)
    tl.store(idx_ptr + row * stride_i + kk, run_i.to(tl.int64), mask=kk < K)
'''

TOPK_LAUNCH = '''
def launch({x}):
    N = {x}.shape[-1]
    x2 = {x}.reshape(-1, N)
    M = x2.shape[0]
    values = torch.empty((M, {k}), device={x}.device, dtype={x}.dtype)
    indices = torch.empty((M, {k}), device={x}.device, dtype=torch.int64)
    CHUNK = min({chunk}, triton.next_power_of_2(N))
    _tdx_topk_chunked_kernel[(M,)](x2, values, indices, N, x2.stride(0), values.stride(0), indices.stride(0),
                                   K={k}, KP=triton.next_power_of_2({k}), CHUNK=CHUNK,
                                   num_warps=4 if CHUNK <= 1024 else {warps})
    return values.reshape({x}.shape[:-1] + ({k},)), indices.reshape({x}.shape[:-1] + ({k},))
'''


LANES_MAX_K = 16


def topk_lanes_code(k: int) -> str:
    """Single-pass top-k kernel for a known k: each of LANES lanes keeps its own sorted top-k in registers.

    Elementwise insertion only (no reduction in the main loop): lane l sees columns l, l + LANES, ...
    in increasing index order and keeps its k largest as (order-preserving int32 key, index) pairs,
    largest first; inserting x at level j is ``new_j = x if x beats r_j but not r_(j-1), r_(j-1) if x
    beats r_(j-1), else r_j`` (strict: a later equal value stays behind, so ties keep the lower index).
    Then k picks over the LANES * k candidates, each one max over (key, ~index) packed in int64.
    """
    init = "".join(f"    k{j} = tl.full([LANES], -2147483648, tl.int32)\n    i{j} = tl.zeros([LANES], tl.int32)\n"
                   for j in range(k))
    cmp = "".join(f"        c{j} = xk > k{j}\n" for j in range(k))
    upd = ""
    for j in range(k - 1, 0, -1):
        upd += (f"        k{j} = tl.where(c{j}, tl.where(c{j - 1}, k{j - 1}, xk), k{j})\n"
                f"        i{j} = tl.where(c{j}, tl.where(c{j - 1}, i{j - 1}, cols), i{j})\n")
    upd += "        k0 = tl.where(c0, xk, k0)\n        i0 = tl.where(c0, cols, i0)\n"
    pack = "".join(f"    p{j} = (k{j}.to(tl.int64) << 32) | (4294967295 - i{j}.to(tl.int64))\n" for j in range(k))
    pick = "        m = tl.where(p0 < prev, p0, -9223372036854775807)\n" + "".join(
        f"        m = tl.maximum(m, tl.where(p{j} < prev, p{j}, -9223372036854775807))\n" for j in range(1, k))
    return f'''
@triton.jit
def _tdx_topk_lanes_kernel(x_ptr, val_ptr, idx_ptr, N, stride_x, stride_v, stride_i, LANES: tl.constexpr):
    # one read of the row; lane l keeps the top-{k} of columns l, l + LANES, ... in registers (sorted, inserted
    # with compares and selects only); then {k} picks over the LANES x {k} candidates. Values are compared as
    # order-preserving int32 keys: padding sorts below -inf, NaN above +inf (torch.topk's order).
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    lanes = tl.arange(0, LANES)
{init}    for start in range(0, N, LANES):
        cols = start + lanes
        ok = cols < N
        xb = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32).to(tl.int32, bitcast=True)
        xk = tl.where(ok, xb ^ ((xb >> 31) & 0x7FFFFFFF), -2147483648)
{cmp}{upd}    # (key, ~index) in one int64: one max per pick orders by value desc, then index asc
{pack}    prev = 9223372036854775807
    for j in tl.static_range({k}):
{pick}        best = tl.max(m, axis=0)
        key = (best >> 32).to(tl.int32)
        vbits = key ^ ((key >> 31) & 0x7FFFFFFF)
        tl.store(val_ptr + row * stride_v + j, vbits.to(tl.float32, bitcast=True).to(val_ptr.dtype.element_ty))
        tl.store(idx_ptr + row * stride_i + j, 4294967295 - (best & 4294967295))
        prev = best
'''


TOPK_LANES_LAUNCH = '''
def launch({x}):
    N = {x}.shape[-1]
    x2 = {x}.reshape(-1, N)
    M = x2.shape[0]
    values = torch.empty((M, {k}), device={x}.device, dtype={x}.dtype)
    indices = torch.empty((M, {k}), device={x}.device, dtype=torch.int64)
    LANES = min({lanes}, max(32, triton.next_power_of_2(N)))
    _tdx_topk_lanes_kernel[(M,)](x2, values, indices, N, x2.stride(0), values.stride(0), indices.stride(0),
                                 LANES=LANES, num_warps={warps})
    return values.reshape({x}.shape[:-1] + ({k},)), indices.reshape({x}.shape[:-1] + ({k},))
'''


def topk_spec(source: str) -> tuple[str, str] | None:
    ref = reference_term(source)
    if ref is None or len(ref.params) != 1:
        return None
    t = strip_f32(ref.result)
    if t[0] != "tuple" or len(t) != 3:
        return None
    a, b = t[1], t[2]
    if not (a[0] == "item" and b[0] == "item" and a[1] == b[1] and a[2] == 0 and b[2] == 1):
        return None
    tk = a[1]
    if tk[0] != "topk" or tk[1] != ("in", ref.params[0]) or not tk[3] or not tk[4]:
        return None
    k = term_src(tk[2])
    if k is None or task_info(source).launch_params() != ref.params:
        return None
    return ref.params[0], k


@template
def topk_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = topk_spec(ctx.original.source)
    if spec is None:
        return []
    x, k = spec
    names = {kk.name for kk in ctx.spec.kernels}
    out = []
    info = task_info(ctx.original.source)
    kval = info.constants.get(k) if not k.lstrip("-").isdigit() else int(k)
    lanes_ok = isinstance(kval, int) and 1 <= kval <= LANES_MAX_K and \
        all(d in ("float32", "float16", "bfloat16") for d in info.dtypes)
    if lanes_ok:
        # H200, l3_topk (8192 x 32000 fp32, k=8), 2026-11-30: 256 lanes / 4 warps 3.14x, 512 / 4 2.09x,
        # 1024 / 8 1.71x: fewer lanes per thread (less sorted state in registers) won, so the next
        # round tries one lane per thread (256 / 8 warps, 128 / 4) after the measured best.
        for lanes, warps in ((256, 4), (256, 8), (128, 4), (512, 4)):
            code = topk_lanes_code(kval) + TOPK_LANES_LAUNCH.format(x=x, k=k, lanes=lanes, warps=warps)
            out.append(Proposal(
                "fuse_passes", apply_template(ctx.spec.source, names, code),
                {"template": "topk_lanes", "lanes": lanes, "num_warps": warps},
                f"top-k template: one read of each row, {lanes} lanes each keeping a sorted top-{k} in registers "
                "(compare/select insertion, no reduction in the main loop), then one int64 max per pick", motivated_by,
                f"one read of x instead of {k} passes, and per element ~{5 * kval} compares/selects instead of "
                f"{k} x (~12 ops + 2 block-wide reductions): from reduction-latency bound toward the memory floor"))
    for chunk, warps in ((2048, 4),) if lanes_ok else ((4096, 8), (2048, 4)):
        code = TOPK_KERNEL + TOPK_LAUNCH.format(x=x, k=k, chunk=chunk, warps=warps)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code),
            {"template": "topk_chunked", "chunk": chunk, "num_warps": warps},
            f"top-k template: each row read once in chunks of {chunk}, merged into a running top-{k} held in "
            "registers (same value-then-index order as repeated max passes)", motivated_by,
            f"one read of x instead of one per k ({k} passes -> 1); the selection work stays, now on registers, "
            "so expect a few x rather than the full pass ratio"))
    return out


# ---------------------------------------------------------------------------------------------
# GroupNorm (+ activation)
# ---------------------------------------------------------------------------------------------

ACTS = {None: "", "silu": "    y = y * tl.sigmoid(y)\n", "sigmoid": "    y = tl.sigmoid(y)\n",
        "relu": "    y = tl.maximum(y, 0.0)\n", "gelu": "    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))\n"}

GN_STATS = '''
@triton.jit
def _tdx_gn_partial_kernel(x_ptr, part_ptr, group_size, chunk, SPLIT, BLOCK: tl.constexpr):
    # program (group, slice): count, mean and M2 of one slice of one group (one pass, Chan merge per block)
    grp = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    base = x_ptr + grp * group_size
    lo = s * chunk
    hi = tl.minimum(lo + chunk, group_size)
    n_a = 0.0
    mean_a = 0.0
    m2_a = 0.0
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hi
        x = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
        n_b = tl.minimum(hi - start, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        d = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d * d, axis=0)
        n_ab = n_a + n_b
        delta = mean_b - mean_a
        mean_a = mean_a + delta * (n_b / n_ab)
        m2_a = m2_a + m2_b + delta * delta * (n_a * n_b / n_ab)
        n_a = n_ab
    out = part_ptr + (grp * SPLIT + s) * 3
    tl.store(out, n_a)
    tl.store(out + 1, mean_a)
    tl.store(out + 2, m2_a)


@triton.jit
def _tdx_gn_finalize_kernel(part_ptr, mean_ptr, rstd_ptr, SPLIT, eps, SPLIT_P2: tl.constexpr):
    grp = tl.program_id(0)
    i = tl.arange(0, SPLIT_P2)
    ok = i < SPLIT
    p = part_ptr + (grp * SPLIT + i) * 3
    n = tl.load(p, mask=ok, other=0.0)
    m = tl.load(p + 1, mask=ok, other=0.0)
    m2 = tl.load(p + 2, mask=ok, other=0.0)
    total = tl.sum(n, axis=0)
    mean = tl.sum(n * m, axis=0) / total
    d = m - mean
    var = tl.sum(m2 + n * d * d, axis=0) / total
    tl.store(mean_ptr + grp, mean)
    tl.store(rstd_ptr + grp, 1.0 / tl.sqrt(var + eps))
'''

GN_NORM_HEAD = '''
@triton.jit
def _tdx_gn_norm_kernel(x_ptr, mean_ptr, rstd_ptr, {wb}out_ptr, C, HW, CPG, G, BLOCK: tl.constexpr):
    # program (n * C + c, block of HW): channel and group values loaded once, no div/mod per element
    nc = tl.program_id(0)
    c = nc % C
    grp = (nc // C) * G + c // CPG
    mean = tl.load(mean_ptr + grp)
    rstd = tl.load(rstd_ptr + grp)
{affine_load}    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    base = nc.to(tl.int64) * HW
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd{affine}
{act}    tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
'''

GN_LAUNCH = '''
def _tdx_num_sms_gn(t):
    """SM count on CUDA; off-GPU (the interpreter) a stand-in large enough to exercise the split path."""
    if t.is_cuda:
        return torch.cuda.get_device_properties(t.device).multi_processor_count
    return 64


def launch({params}):
    N, C = {x}.shape[0], {x}.shape[1]
    HW = {x}.numel() // (N * C)
    G = {groups}
    CPG = C // G
    group_size = CPG * HW
    xc = {x}.reshape(N * G, group_size)
    # split each group's statistics over several programs so that all SMs share the pass over x
    BLOCK_S = 1024 if {x}.is_cuda else 16
    split = max(1, min(triton.cdiv(8 * _tdx_num_sms_gn({x}), N * G), triton.cdiv(group_size, 4 * BLOCK_S)))
    chunk = triton.cdiv(triton.cdiv(group_size, split), BLOCK_S) * BLOCK_S
    split = triton.cdiv(group_size, chunk)
    part = torch.empty((N * G, split, 3), device={x}.device, dtype=torch.float32)
    _tdx_gn_partial_kernel[(N * G, split)](xc, part, group_size, chunk, split, BLOCK=BLOCK_S, num_warps=4)
    mean = torch.empty((N * G,), device={x}.device, dtype=torch.float32)
    rstd = torch.empty((N * G,), device={x}.device, dtype=torch.float32)
    _tdx_gn_finalize_kernel[(N * G,)](part, mean, rstd, split, {eps}, SPLIT_P2=triton.next_power_of_2(split))
    out = torch.empty({x}.shape, device={x}.device, dtype={x}.dtype)
    BLOCK = min({max_block}, triton.next_power_of_2(HW))
    _tdx_gn_norm_kernel[(N * C, triton.cdiv(HW, BLOCK))]({x}, mean, rstd, {wb_args}out, C, HW, CPG, G, BLOCK=BLOCK,
                                                        num_warps=4 if BLOCK <= 1024 else 8)
    return out
'''


def groupnorm_spec(source: str) -> dict | None:
    ref = reference_term(source)
    if ref is None:
        return None
    t = strip_f32(ref.result)
    if t[0] != "cast" or t[2] not in ref.params:
        return None
    body = t[1]
    act = None
    if body[0] in ("silu", "sigmoid", "relu", "gelu"):
        act, body = body[0], body[1]
    if body[0] != "group_norm" or body[1][0] != "in" or body[1][1] != t[2]:
        return None
    groups, eps = term_src(body[2]), term_src(body[5])
    w = body[3][1] if body[3][0] == "in" else None
    b = body[4][1] if body[4][0] == "in" else None
    if groups is None or eps is None or (body[3][0] not in ("in", "const")) or (body[4][0] not in ("in", "const")):
        return None
    if task_info(source).launch_params() != ref.params:
        return None
    return {"x": t[2], "groups": groups, "eps": eps, "w": w, "b": b, "act": act, "params": ref.params}


def groupnorm_code(s: dict, max_block: int) -> str:
    wb = "".join(f"{n}_ptr, " for n, v in (("w", s["w"]), ("b", s["b"])) if v)
    affine_load = ""
    affine = ""
    if s["w"]:
        affine_load += "    w = tl.load(w_ptr + c).to(tl.float32)\n"
        affine += " * w"
    if s["b"]:
        affine_load += "    b = tl.load(b_ptr + c).to(tl.float32)\n"
        affine += " + b"
    head = GN_NORM_HEAD.format(wb=wb, affine_load=affine_load, affine=affine, act=ACTS[s["act"]])
    wb_args = "".join(f"{v}, " for v in (s["w"], s["b"]) if v)
    launch = GN_LAUNCH.format(params=", ".join(s["params"]), x=s["x"], groups=s["groups"], eps=s["eps"],
                              wb_args=wb_args, max_block=max_block)
    return GN_STATS + head + launch


@template
def groupnorm_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    s = groupnorm_spec(ctx.original.source)
    if s is None:
        return []
    names = {k.name for k in ctx.spec.kernels}
    out = []
    for max_block in (2048, 4096):
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, groupnorm_code(s, max_block)),
            {"template": "groupnorm" + (f"_{s['act']}" if s["act"] else ""), "max_block": max_block},
            f"GroupNorm template: one-pass split statistics (Chan partials, finalize), normalize over "
            f"(n*c, hw) blocks of up to {max_block} with per-program scale/shift"
            + (f", {s['act']} fused" if s["act"] else ""), motivated_by,
            "statistics read x once with all SMs busy (instead of twice by N*G programs), no per-element "
            "div/mod or gathers in the normalize pass: 4 passes over x -> 3, at full bandwidth"))
    return out


# ---------------------------------------------------------------------------------------------
# BatchNorm (inference)
# ---------------------------------------------------------------------------------------------

BN_KERNEL = '''
@triton.jit
def _tdx_bn_infer_kernel(x_ptr, mean_ptr, var_ptr, {wb}out_ptr, C, HW, eps, BLOCK: tl.constexpr):
    # program (n * C + c, block of HW): the channel's statistics and affine loaded once per program
    nc = tl.program_id(0)
    c = nc % C
    mean = tl.load(mean_ptr + c).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.load(var_ptr + c).to(tl.float32) + eps)
{affine_load}    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    base = nc.to(tl.int64) * HW
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd{affine}
{act}    tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
'''

BN_LAUNCH = '''
def launch({params}):
    N, C = {x}.shape[0], {x}.shape[1]
    HW = {x}.numel() // (N * C)
    out = torch.empty({x}.shape, device={x}.device, dtype={x}.dtype)
    BLOCK = min({max_block}, triton.next_power_of_2(HW))
    _tdx_bn_infer_kernel[(N * C, triton.cdiv(HW, BLOCK))]({x}, {mean}, {var}, {wb_args}out, C, HW, {eps}, BLOCK=BLOCK,
                                                         num_warps=4 if BLOCK <= 1024 else 8)
    return out
'''


def batchnorm_spec(source: str) -> dict | None:
    ref = reference_term(source)
    if ref is None:
        return None
    t = strip_f32(ref.result)
    if t[0] != "cast" or t[2] not in ref.params:
        return None
    body = t[1]
    act = None
    if body[0] in ("silu", "sigmoid", "relu", "gelu"):
        act, body = body[0], body[1]
    if body[0] != "batch_norm" or body[1] != ("in", t[2]) or body[2][0] != "in" or body[3][0] != "in":
        return None
    if any(x[0] not in ("in", "const") or (x[0] == "const" and x[1] is not None) for x in (body[4], body[5])):
        return None
    eps = term_src(body[6])
    if eps is None or task_info(source).launch_params() != ref.params:
        return None
    return {"x": t[2], "mean": body[2][1], "var": body[3][1], "w": body[4][1] if body[4][0] == "in" else None,
            "b": body[5][1] if body[5][0] == "in" else None, "eps": eps, "act": act, "params": ref.params}


def batchnorm_code(s: dict, max_block: int) -> str:
    wb = "".join(f"{n}_ptr, " for n, v in (("w", s["w"]), ("b", s["b"])) if v)
    affine_load, affine = "", ""
    if s["w"]:
        affine_load += "    w = tl.load(w_ptr + c).to(tl.float32)\n"
        affine += " * w"
    if s["b"]:
        affine_load += "    b = tl.load(b_ptr + c).to(tl.float32)\n"
        affine += " + b"
    kernel = BN_KERNEL.format(wb=wb, affine_load=affine_load, affine=affine, act=ACTS[s["act"]])
    wb_args = "".join(f"{v}, " for v in (s["w"], s["b"]) if v)
    return kernel + BN_LAUNCH.format(params=", ".join(s["params"]), x=s["x"], mean=s["mean"], var=s["var"],
                                     wb_args=wb_args, eps=s["eps"], max_block=max_block)


@template
def batchnorm_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    s = batchnorm_spec(ctx.original.source)
    if s is None:
        return []
    names = {k.name for k in ctx.spec.kernels}
    return [Proposal("fuse_passes", apply_template(ctx.spec.source, names, batchnorm_code(s, mb)),
                     {"template": "batchnorm_inference", "max_block": mb},
                     f"BatchNorm (inference) template: programs over (n*c, blocks of up to {mb} of h*w), channel "
                     "statistics and affine loaded once per program", motivated_by,
                     "no per-element div/mod and four per-element gathers: one read and one write per element "
                     "with almost no index math (a modest gain; the kernel was near the bandwidth)")
            for mb in (1024, 2048)]


# ---------------------------------------------------------------------------------------------
# row scatter without conflicts: out = x.index_copy(0, idx, src)
# ---------------------------------------------------------------------------------------------

SCATTER_KERNELS = '''
@triton.jit
def _tdx_scatter_mark_kernel(idx_ptr, mark_ptr, M, BLOCK: tl.constexpr):
    # mark[idx[i]] = i: which source row (if any) lands on each output row
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < M
    tl.store(mark_ptr + tl.load(idx_ptr + i, mask=ok, other=0), i, mask=ok)


@triton.jit
def _tdx_scatter_rows_kernel(x_ptr, src_ptr, mark_ptr, out_ptr, D, stride_x, stride_src, stride_out,
                             BLOCK: tl.constexpr):
    # each output row written once, read from src where it is overwritten and from x elsewhere
    row = tl.program_id(0).to(tl.int64)
    j = tl.load(mark_ptr + row).to(tl.int64)
    from_src = j >= 0
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        cm = cols < D
        vs = tl.load(src_ptr + j * stride_src + cols, mask=cm & from_src, other=0.0)
        vx = tl.load(x_ptr + row * stride_x + cols, mask=cm & (j < 0), other=0.0)
        tl.store(out_ptr + row * stride_out + cols, tl.where(from_src, vs, vx), mask=cm)
'''

SCATTER_LAUNCH = '''
def launch({params}):
    V, D = {x}.shape
    M = {idx}.shape[0]
    out = torch.empty_like({x})
    mark = torch.full((V,), -1, device={x}.device, dtype=torch.int32)
    if M > 0:
        _tdx_scatter_mark_kernel[(triton.cdiv(M, 1024),)]({idx}, mark, M, BLOCK=1024)
    BLOCK = min({max_block}, triton.next_power_of_2(D))
    _tdx_scatter_rows_kernel[(V,)]({x}, {src}, mark, out, D, {x}.stride(0), {src}.stride(0), out.stride(0),
                                   BLOCK=BLOCK, num_warps=4 if BLOCK <= 1024 else 8)
    return out
'''


def scatter_spec(source: str) -> dict | None:
    ref = reference_term(source)
    if ref is None or len(ref.params) != 3:
        return None
    t = strip_f32(ref.result)
    if t[0] != "index_copy" or t[1][0] != "in" or t[2][0] != "in" or t[3][0] != "in":
        return None
    if task_info(source).launch_params() != ref.params:
        return None
    return {"x": t[1][1], "idx": t[2][1], "src": t[3][1], "params": ref.params}


@template
def scatter_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    s = scatter_spec(ctx.original.source)
    if s is None:
        return []
    names = {k.name for k in ctx.spec.kernels}
    out = []
    for mb in (4096, 1024):
        code = SCATTER_KERNELS + SCATTER_LAUNCH.format(params=", ".join(s["params"]), x=s["x"], idx=s["idx"],
                                                       src=s["src"], max_block=mb)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code), {"template": "index_copy_rows",
                                                                          "max_block": mb},
            "index_copy template: a row map (mark[idx[i]] = i), then every output row written once from src "
            f"or x (blocks of up to {mb})", motivated_by,
            "overwritten rows are no longer copied from x and then rewritten: bytes from read V + write V + "
            "read M + write M rows to read V + write V rows (~1.5x at half the rows replaced)"))
    return out


# ---------------------------------------------------------------------------------------------
# index_add along dim 0 (rows with repeated indices): segment sums instead of one atomic per element
# ---------------------------------------------------------------------------------------------

INDEX_ADD_CODE = '''
@triton.jit
def _tdx_ia_count_kernel(idx_ptr, cnt_ptr, M, BLOCK: tl.constexpr):
    # rows per destination (int32 histogram of idx): M integer atomics instead of M * D float ones
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < M
    dst = tl.load(idx_ptr + offs, mask=ok, other=0)
    tl.atomic_add(cnt_ptr + dst, tl.full([BLOCK], 1, tl.int32), mask=ok)


@triton.jit
def _tdx_ia_scan_kernel(cnt_ptr, off_ptr, V, BLOCK: tl.constexpr):
    # exclusive prefix sum of the counts: where each destination's source rows start in perm
    carry = 0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        c = tl.load(cnt_ptr + cols, mask=cols < V, other=0)
        incl = tl.cumsum(c, axis=0)
        tl.store(off_ptr + cols, carry + incl - c, mask=cols < V)
        carry += tl.sum(c, axis=0)


@triton.jit
def _tdx_ia_bucket_kernel(idx_ptr, off_ptr, cur_ptr, perm_ptr, M, BLOCK: tl.constexpr):
    # source row ids grouped by destination (counting sort; order inside a group is arbitrary)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < M
    dst = tl.load(idx_ptr + offs, mask=ok, other=0)
    slot = tl.atomic_add(cur_ptr + dst, tl.full([BLOCK], 1, tl.int32), mask=ok)
    base = tl.load(off_ptr + dst, mask=ok, other=0)
    tl.store(perm_ptr + base + slot, offs, mask=ok)


@triton.jit
def _tdx_ia_segment_kernel(x_ptr, src_ptr, perm_ptr, off_ptr, cnt_ptr, out_ptr, D, stride_x, stride_src,
                           stride_out, BLOCK_D: tl.constexpr):
    # program (destination row, column block): out = x + the sum of its source rows, one write per element
    v = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    ok = cols < D
    acc = tl.load(x_ptr + v * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    start = tl.load(off_ptr + v)
    n = tl.load(cnt_ptr + v)
    for j in range(start, start + n):
        r = tl.load(perm_ptr + j).to(tl.int64)
        acc += tl.load(src_ptr + r * stride_src + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + v * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=ok)


def launch({params}):
    V = {x}.shape[0]
    M = {idx}.shape[0]
    x2 = {x}.reshape(V, -1)
    s2 = {src}.reshape(M, -1)
    D = x2.shape[1]
    out = torch.empty_like(x2)
    cnt = torch.zeros((V,), device={x}.device, dtype=torch.int32)
    cur = torch.zeros((V,), device={x}.device, dtype=torch.int32)
    off = torch.empty((V,), device={x}.device, dtype=torch.int32)
    perm = torch.empty((max(M, 1),), device={x}.device, dtype=torch.int32)
    BLOCK = 1024
    _tdx_ia_count_kernel[(triton.cdiv(M, BLOCK),)]({idx}, cnt, M, BLOCK=BLOCK)
    _tdx_ia_scan_kernel[(1,)](cnt, off, V, BLOCK=BLOCK)
    _tdx_ia_bucket_kernel[(triton.cdiv(M, BLOCK),)]({idx}, off, cur, perm, M, BLOCK=BLOCK)
    BLOCK_D = min({block_d}, max(16, triton.next_power_of_2(D)))
    _tdx_ia_segment_kernel[(V, triton.cdiv(D, BLOCK_D))](x2, s2, perm, off, cnt, out, D, x2.stride(0), s2.stride(0),
                                                         out.stride(0), BLOCK_D=BLOCK_D, num_warps={warps})
    return out.reshape({x}.shape)
'''


def index_add_spec(source: str) -> tuple[str, str, str] | None:
    """(x, src, idx) for ``return x.index_add(0, idx, src)`` (dim 0, no alpha), the launcher taking the same names."""
    import ast
    info = task_info(source)
    ref = info.reference
    if ref is None or len(ref.body) != 1 or not isinstance(ref.body[0], ast.Return):
        return None
    call = ref.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "index_add"
            and isinstance(call.func.value, ast.Name)):
        return None
    args = list(call.args)
    kw = {k.arg: k.value for k in call.keywords}
    if set(kw) - {"dim", "index", "source"} or len(args) + len(kw) != 3:
        return None
    names = ["dim", "index", "source"]
    bound = dict(zip(names, args))
    bound.update(kw)
    dim, idx, src = bound.get("dim"), bound.get("index"), bound.get("source")
    if not (isinstance(dim, ast.Constant) and dim.value == 0 and isinstance(idx, ast.Name) and isinstance(src, ast.Name)):
        return None
    x = call.func.value.id
    params = [a.arg for a in ref.args.args]
    if sorted(params) != sorted({x, idx.id, src.id}) or info.launch_params() != params:
        return None
    return x, src.id, idx.id


@template
def index_add_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = index_add_spec(ctx.original.source)
    if spec is None:
        return []
    x, src, idx = spec
    params = task_info(ctx.original.source).launch_params()
    names = {kk.name for kk in ctx.spec.kernels}
    out = []
    for block_d, warps in ((1024, 4), (2048, 8)):
        code = INDEX_ADD_CODE.format(params=", ".join(params), x=x, src=src, idx=idx, block_d=block_d, warps=warps)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code),
            {"template": "index_add_segments", "BLOCK_D": block_d, "num_warps": warps},
            f"index_add template: counting sort of idx in three tiny kernels, then one program per (destination row, "
            f"{block_d} columns) adds its source rows to x and writes out once (no clone, no float atomics)",
            motivated_by,
            "HBM traffic from clone (read x + write out) + M*D atomic read-modify-writes on rows that do not fit L2 "
            "to one read of x and src and one write of out (~2x fewer bytes); the index work is O(M) integers"))
    return out


# ---------------------------------------------------------------------------------------------
# max_pool2d on NCHW: 2-D output tiles per (n, c) plane instead of flat outputs with div/mod per element
# ---------------------------------------------------------------------------------------------

MAXPOOL_CODE = '''
@triton.jit
def _tdx_maxpool2d_tile_kernel(x_ptr, out_ptr, C, H, W, OH, OW, sxn, sxc, sxh, sxw,
                               KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                               PH: tl.constexpr, PW: tl.constexpr, TOH: tl.constexpr, BLOCK_OW: tl.constexpr):
    # program (n*c plane, TOH output rows, BLOCK_OW output columns): plane, rows and columns come from the
    # program ids and aranges (no div/mod per element); row bounds are checked per row, column bounds per column
    nc = tl.program_id(0)
    n = (nc // C).to(tl.int64)
    c = (nc % C).to(tl.int64)
    oh = tl.program_id(1) * TOH + tl.arange(0, TOH)
    ow = tl.program_id(2) * BLOCK_OW + tl.arange(0, BLOCK_OW)
    out_ok = (oh[:, None] < OH) & (ow[None, :] < OW)
    base = x_ptr + n * sxn + c * sxc
    acc = tl.full([TOH, BLOCK_OW], float("-inf"), dtype=tl.float32)
    for kh in tl.static_range(KH):
        ih = oh * SH - PH + kh
        row_ok = (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * SW - PW + kw
            col_ok = (iw >= 0) & (iw < W)
            v = tl.load(base + ih[:, None] * sxh + iw[None, :] * sxw,
                        mask=out_ok & row_ok[:, None] & col_ok[None, :], other=float("-inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    o = out_ptr + nc.to(tl.int64) * OH * OW + oh[:, None] * OW + ow[None, :]
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=out_ok)


def launch({x}):
    N, C, H, W = {x}.shape
    KH, KW, SH, SW, PH, PW = {kh}, {kw}, {sh}, {sw}, {ph}, {pw}
    OH = (H + 2 * PH - KH) // SH + 1
    OW = (W + 2 * PW - KW) // SW + 1
    out = torch.empty((N, C, OH, OW), device={x}.device, dtype={x}.dtype)
    BLOCK_OW = min(triton.next_power_of_2(OW), {max_ow})
    TOH = max(1, min({tile} // BLOCK_OW, triton.next_power_of_2(OH)))
    grid = (N * C, triton.cdiv(OH, TOH), triton.cdiv(OW, BLOCK_OW))
    _tdx_maxpool2d_tile_kernel[grid]({x}, out, C, H, W, OH, OW, {x}.stride(0), {x}.stride(1), {x}.stride(2),
                                     {x}.stride(3), KH=KH, KW=KW, SH=SH, SW=SW, PH=PH, PW=PW, TOH=TOH,
                                     BLOCK_OW=BLOCK_OW, num_warps={warps})
    return out
'''


#: (outputs per program, widest column block, num_warps) of the max_pool2d template's candidates
MAXPOOL_TILES = ((256, 128, 8), (128, 128, 4))


def maxpool2d_spec(source: str) -> dict | None:
    """x and (kh, kw, sh, sw, ph, pw) for ``return F.max_pool2d(x, k, stride, padding)`` with literal ints."""
    import ast
    info = task_info(source)
    ref = info.reference
    if ref is None or len(ref.body) != 1 or not isinstance(ref.body[0], ast.Return):
        return None
    call = ref.body[0].value
    if not (isinstance(call, ast.Call) and ast.unparse(call.func).split(".")[-1] == "max_pool2d" and call.args
            and isinstance(call.args[0], ast.Name)):
        return None
    names = ["kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"]
    bound = dict(zip(names, call.args[1:]))
    for k in call.keywords:
        if k.arg not in names or k.arg in bound:
            return None
        bound[k.arg] = k.value

    def pair(node, default):
        if node is None:
            return default
        try:
            v = ast.literal_eval(node)
        except ValueError:
            return None
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return (v, v)
        if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            return tuple(v)
        return None

    k = pair(bound.get("kernel_size"), None)
    s = pair(bound.get("stride"), k)
    p = pair(bound.get("padding"), (0, 0))
    d = pair(bound.get("dilation"), (1, 1))
    flags = [bound.get(f) for f in ("ceil_mode", "return_indices")]
    if None in (k, s, p) or d != (1, 1) or any(f is not None and not (isinstance(f, ast.Constant) and f.value is False)
                                              for f in flags):
        return None
    x = call.args[0].id
    if [a.arg for a in ref.args.args] != [x] or info.launch_params() != [x] or min(k + s) < 1:
        return None
    return {"x": x, "kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1]}


@template
def maxpool2d_template(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    spec = maxpool2d_spec(ctx.original.source)
    if spec is None:
        return []
    names = {kk.name for kk in ctx.spec.kernels}
    out = []
    # one output per thread (256 outputs on 8 warps, 128 on 4): on the H200 the 1024- and 2048-output tiles were
    # 0.47x and 0.25x of the flat 256-output kernel (2026-11-30): a thread's outputs are a stride apart in the
    # input, so more of them per thread only spread each load instruction over more lines
    for tile, max_ow, warps in MAXPOOL_TILES:
        code = MAXPOOL_CODE.format(tile=tile, max_ow=max_ow, warps=warps, **spec)
        out.append(Proposal(
            "fuse_passes", apply_template(ctx.spec.source, names, code),
            {"template": "maxpool2d_tiles", "tile": tile, "num_warps": warps},
            f"max_pool2d template: {tile}-output 2-D tiles per (n, c) plane, plane/row/column from program ids "
            "(no div/mod per output), row and column bounds checked once per row/column", motivated_by,
            "the per-output index math (4 integer div/mod and 9 four-way bound checks) drops to a few adds per tap: "
            "from issue-bound toward the memory floor (input read once through L1/L2, output written once)"))
    return out
