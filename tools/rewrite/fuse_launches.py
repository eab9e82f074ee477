"""Kernel launches chained through a temporary, fused into one kernel (the temporary never hits HBM).

Three shapes of chain are handled, all through a temporary ``T`` that launch() allocates itself
(``torch.empty``/``empty_like``), does not return, and that one kernel only stores and the next
only loads:

- flat -> flat: both kernels use the flat ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` /
  ``mask = offs < n`` indexing with the same grid, block and bound: the consumer's body is inlined
  after the producer's, the load of T replaced by the value the producer stored (cast to T's dtype,
  as the store did).
- tile -> flat (epilogue): a 2-D tile kernel (a matmul) stores T at ``A[:, None] * s0 + B[None, :] * s1``
  with (s0, s1) = T.stride() of a fresh contiguous 2-D T, and a flat elementwise kernel over
  ``T.numel()`` consumes it: the consumer's per-element body runs on the tile right after the
  product, with ``offs`` = the tile's flat index and its mask = the tile mask.
- flat -> tile (prologue): a flat elementwise producer writes T, and a tile kernel loads T tiles
  at ``A[:, None] * s0 + B[None, :] * s1``: the producer's body runs on each tile where the load was.

Preconditions are checked conservatively; anything else gives no proposal.

The chains are found in ``fuse_plan`` (kernel shapes: ``fuse_shapes``) and built in ``fuse_build``; a loop of
per-tensor launches becomes one multi-tensor launch (``multi_tensor``).
"""

from __future__ import annotations

from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import parse
from tritondx.tools.rewrite.fuse_build import fuse_epilogue, fuse_flat_flat, fuse_prologue
from tritondx.tools.rewrite.fuse_plan import plan_chains
from tritondx.tools.rewrite.multi_tensor import MT_MAX, plan_multi_tensor


@rewrite("fuse_launches", "elementwise launches chained through a temporary fused into one kernel "
                          "(flat chains, matmul epilogues, elementwise prologues of a matmul); a loop of "
                          "per-tensor launches turned into one multi-tensor launch", priority=8)
def fuse_launches(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("fuse_launches")
    if not motivating:
        return []
    source = ctx.spec.source
    out: list[Proposal] = []
    for _ in range(4):   # a chain of several kernels fuses pairwise, one pair per step
        module = parse(source)
        done = False
        for plan in plan_chains(module):
            build = {"flat": fuse_flat_flat, "epilogue": fuse_epilogue, "prologue": fuse_prologue}[plan.kind]
            try:
                new = build(module, plan)
            except (StopIteration, KeyError, IndexError, AttributeError):
                new = None
            if new is None:
                continue
            source = new.code
            out.append((plan.kind, plan.producer.kernel, plan.consumer.kernel, plan.temp))
            done = True
            break
        if not done:
            break
    multi = multi_tensor_proposals(ctx, [f.id for f in motivating])
    if not out or source == ctx.spec.source:
        return multi
    kinds = {k for k, *_ in out}
    what = "; ".join(f"{p} -> {c} through {t} ({k})" for k, p, c, t in out)
    pred = {"flat": "the temporary's write and read-back disappear: fewer HBM passes (e.g. 6 -> 4) and one launch",
            "epilogue": "the consumer runs on the accumulator tile: C is written once instead of written, read and "
                        "written again",
            "prologue": "the producer runs on each tile as it is loaded: the intermediate tensor is never written "
                        "or re-read (the loop does the extra element math)"}
    return [Proposal("fuse_launches", source, {"chains": [list(x) for x in out]}, f"fused: {what}",
                     [f.id for f in motivating], "; ".join(pred[k] for k in sorted(kinds)))] + multi


def multi_tensor_proposals(ctx: RewriteContext, motivated_by: list[str]) -> list[Proposal]:
    """A loop of per-tensor launches of one kernel -> one multi-tensor launch per group of tensors."""
    out = []
    for source, kernel in plan_multi_tensor(ctx.spec.source):
        out.append(Proposal(
            "fuse_launches", source, {"multi_tensor": kernel, "max_items": MT_MAX},
            f"multi-tensor launch: the loop records each {kernel} launch and one {kernel}_mt launch runs up to "
            f"{MT_MAX} of them (per-tensor arguments as tuples, a program-offset table picks the tensor)",
            motivated_by,
            "one host launch and one GPU launch instead of one per tensor: the per-launch host cost (Python binding, "
            "~10-20 us each) and the tail of every small grid disappear; the bytes moved are unchanged"))
    return out
