"""Launch-configuration search: block sizes, num_warps, num_stages, bounded by the evidence."""

from __future__ import annotations

from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import current_launch_values, set_launch_values

# Elementwise / row-loop kernels: elements per program and warps.
FLAT_SPACE = [(1024, 4), (2048, 4), (4096, 8), (2048, 8), (8192, 8), (512, 4)]
# Matmul-like kernels: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
MATMUL_SPACE = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (64, 128, 64, 4, 4),
                (128, 64, 64, 4, 4), (64, 64, 64, 4, 3)]
MATMUL_NAMES = {"M": ("BLOCK_M", "BLOCK_SIZE_M", "BM"), "N": ("BLOCK_N", "BLOCK_SIZE_N", "BN"),
                "K": ("BLOCK_K", "BLOCK_SIZE_K", "BK")}


def _matmul_params(params: list[str]) -> dict[str, str] | None:
    found = {}
    for dim, names in MATMUL_NAMES.items():
        hit = next((p for p in params if p in names), None)
        if hit is None:
            return None
        found[dim] = hit
    return found


@rewrite("launch_config", "search block sizes, num_warps and num_stages within the evidence's bounds", priority=50)
def launch_config(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("launch_config")
    if not motivating:
        return []
    kernels = {k.name: k.constexpr_params for k in ctx.spec.kernels}
    current = current_launch_values(ctx.spec.source, set(kernels), kernels)
    spills = any(f.detector == "register_spills" for f in motivating)
    small_grid = any(f.detector == "grid_too_small" for f in motivating)
    proposals: list[Proposal] = []
    space_mm = MATMUL_SPACE[3:] + MATMUL_SPACE[:3] if (spills or small_grid) else MATMUL_SPACE
    space_flat = sorted(FLAT_SPACE, key=lambda c: c[0]) if (spills or small_grid) else FLAT_SPACE
    n_configs = max(len(space_mm), len(space_flat))
    for i in range(n_configs):
        values: dict[str, dict[str, int]] = {}
        for kname, vals in current.items():
            mm = _matmul_params(list(vals))
            if mm and i < len(space_mm):
                bm, bn, bk, w, s = space_mm[i]
                values[kname] = {mm["M"]: bm, mm["N"]: bn, mm["K"]: bk, "num_warps": w, "num_stages": s}
            elif not mm and i < len(space_flat):
                blocks = [p for p in vals if "BLOCK" in p.upper() and p not in ("num_warps", "num_stages")]
                if len(blocks) != 1:
                    continue
                b, w = space_flat[i]
                values[kname] = {blocks[0]: b, "num_warps": w}
        values = {k: v for k, v in values.items() if any(current[k].get(p) != x for p, x in v.items())}
        if not values:
            continue
        source = set_launch_values(ctx.spec.source, values)
        if source == ctx.spec.source:
            continue
        desc = "; ".join(f"{k}: " + ", ".join(f"{p}={x}" for p, x in v.items()) for k, v in values.items())
        proposals.append(Proposal(
            family="launch_config", source=source, params=values, description=desc,
            motivated_by=[f.id for f in motivating],
            prediction="more work per program and enough warps to keep loads in flight; "
                       "for memory-bound kernels toward the copy bandwidth"))
    return proposals
