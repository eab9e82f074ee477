"""fuse_passes templates matched on the reference: GroupNorm (+ activation) and BatchNorm (inference).

- GroupNorm (``act(group_norm(x, G, w, b, eps))`` cast to x's dtype, act in {none, silu, sigmoid, relu,
  gelu}): statistics split across SPLIT programs per group (one pass, Chan-merged count/mean/M2
  partials), a finalize kernel, then a normalize kernel over (n*c, hw blocks) programs with the
  per-channel scale/shift and group statistics loaded once per program instead of per element.
- BatchNorm (inference, with the running statistics): one normalize kernel over (n*c, hw blocks) programs with the
  per-channel scale and shift loaded once per program.
"""

from __future__ import annotations

from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.rewrite.refmatch import reference_term, strip_f32, term_src
from tritondx.tools.rewrite.taskinfo import task_info
from tritondx.tools.rewrite.templates import apply_template, template


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
