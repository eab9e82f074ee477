"""Tiny autotune spaces widened around their best configuration.

An ``@triton.autotune`` with one or two distinct configs gives the tuner nothing to choose. The list becomes
the original configs (first, in their order) plus the coordinate neighbors of the first one: each block-size
constexpr (a power of two whose name says BLOCK) halved and doubled, ``num_warps`` halved and doubled (2..16),
``num_stages`` one less and one more (1..5; 2 and 4 around an absent one, whose default is 3). Neighbours move
one coordinate at a time, so the list stays small (at most ``MAX_CONFIGS``); the tuner measures them on the
device, the launch-space search may refine further. Blocks stay powers of two (tl.arange needs it) and at least
16 when the kernel calls tl.dot. Nothing else changes: key, grid lambda, launcher.
"""

from __future__ import annotations

import ast

import libcst as cst
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import calls_named, code_of, dotted, expr, jit_functions, parse, replace_nodes

MAX_CONFIGS = 12


def _config(call: cst.Call) -> tuple[dict[str, int], dict[str, int]] | None:
    """(constexpr values, options) of a literal ``triton.Config({...}, num_warps=.., num_stages=..)``."""
    try:
        node = ast.parse(code_of(call), mode="eval").body
        kwargs = ast.literal_eval(node.args[0]) if node.args else {}
        opts = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (ValueError, SyntaxError, IndexError):
        return None
    if not isinstance(kwargs, dict) or not all(isinstance(v, int) for v in list(kwargs.values()) + list(opts.values())):
        return None
    return kwargs, opts


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def neighbors(values: dict[str, int], opts: dict[str, int], min_block: int) -> list[tuple[dict, dict]]:
    out = []
    for k, v in values.items():
        if "BLOCK" in k.upper() and _pow2(v):
            for nv in (v // 2, v * 2):
                if min_block <= nv <= 1024:
                    out.append(({**values, k: nv}, opts))
    w = opts.get("num_warps", 4)
    for nw in (w // 2, w * 2):
        if 2 <= nw <= 16:
            out.append((values, {**opts, "num_warps": nw}))
    s = opts.get("num_stages")
    for ns in ((s - 1, s + 1) if s is not None else (2, 4)):
        if 1 <= ns <= 5:
            out.append((values, {**opts, "num_stages": ns}))
    return out


def _render(values: dict, opts: dict) -> str:
    kw = ", ".join(f"{k}={v}" for k, v in opts.items())
    return f"triton.Config({values!r}{', ' + kw if kw else ''})"


def widen_source(source: str, kernels: set[str] | None = None) -> tuple[str, dict[str, int]] | None:
    module = parse(source)
    repl, done = {}, {}
    for name, fn in jit_functions(module).items():
        if kernels is not None and name not in kernels:
            continue
        for d in fn.decorators:
            dec = d.decorator
            if not (isinstance(dec, cst.Call) and dotted(dec.func) in ("triton.autotune", "autotune")):
                continue
            cfg = next((a.value for a in dec.args if a.keyword and a.keyword.value == "configs"), None)
            if not isinstance(cfg, cst.List):
                continue
            parsed = [_config(e.value) if isinstance(e.value, cst.Call) else None for e in cfg.elements]
            if any(p is None for p in parsed):
                continue
            distinct = list(dict.fromkeys(_render(*p) for p in parsed))
            if len(distinct) > 2:
                continue
            min_block = 16 if calls_named(fn, "tl.dot") else 1
            new = list(distinct)
            for v, o in neighbors(*parsed[0], min_block):
                r = _render(v, o)
                if r not in new and len(new) < MAX_CONFIGS:
                    new.append(r)
            if len(new) == len(distinct):
                continue
            repl[id(cfg)] = expr("[\n        " + ",\n        ".join(new) + ",\n    ]")
            done[name] = len(new)
    if not done:
        return None
    return replace_nodes(module, repl).code, done


@rewrite("autotune_widen", "an @triton.autotune with one or two configs widened with the coordinate neighbors of its "
                           "first config (blocks x/2 x2, num_warps x/2 x2, num_stages -1 +1)", priority=50)
def autotune_widen(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("autotune_widen")
    if not motivating:
        return []
    kernels = {f.kernel for f in motivating}
    res = widen_source(ctx.spec.source, None if None in kernels else kernels)
    if res is None:
        return []
    src, done = res
    return [Proposal("autotune_widen", src, {"configs": done},
                     "; ".join(f"{k}: {n} configs" for k, n in done.items()), [f.id for f in motivating],
                     "the tuner picks the best of the neighbors on the device (often another block or warp count "
                     "for this GPU); the first call per key pays the tuning")]
