"""One flat tile for an interleaved pair read (or written) as two strided tensors.

A kernel that keeps pairs interleaved in memory (a complex number's real and imaginary parts, a rope's even and odd
elements) often reads them as two tensors,

    offs_n = start + tl.arange(0, BLOCK // 2) * 2          # even elements only
    x_ptrs = x_ptr + stride_m * offs_m[:, None] + stride_n * offs_n[None, :]
    real = tl.load(x_ptrs, mask=m, other=0.0)
    imag = tl.load(x_ptrs + 1, mask=m_plus_one, other=0.0)
    ...
    tl.store(out_ptrs, out_real, mask=m)
    tl.store(out_ptrs + 1, out_imag, mask=m_plus_one)

so neither access has a unit-stride dimension: each lane moves 2 bytes (fp16 on sm_90 compiles to ``ld.global.b16``)
and the IR tier's ``uncoalesced_access`` names the pair. Read as one flat tile of ``2 * (BLOCK // 2)`` elements along
the pair axis, reshaped to ``[..., BLOCK // 2, 2]`` and taken apart with ``tl.split`` (a store: ``tl.join`` and the
flat tile), the access is contiguous where the pair axis's stride is 1, which the JIT specializes (fp16 on sm_90:
``ld.global.v4.b32``, no shared memory; checked on PTX compiled without a GPU).

Exact for every stride ``s`` of the pair axis: element ``j`` of the flat tile is pair ``j // 2``'s element ``j % 2``,
at ``s * (start + 2 * (j // 2)) + j % 2 = s * (start + j) + (1 - s) * (j % 2)``; where ``s`` is specialized to 1 the
second term folds away. The flat mask is the first access's mask with ``offs_n`` replaced by ``start + j``, which is
the pair's second mask on odd ``j`` only when that mask is the first one with ``offs_n`` moved on by one; the rewrite
applies only then (else a mask would be invented).

Preconditions: the pair index ``offs_n = start + tl.arange(0, H) * 2`` assigned once in the kernel; the address a name
assigned once whose only use of ``offs_n`` is ``offs_n`` (1-D) or ``offs_n[None, :]`` (the last of 2 dimensions),
optionally times a stride; two ``tl.load`` (or ``tl.store``) statements of one block (the kernel's body, a loop's),
``p`` and ``p + 1``, with the same ``other`` and no other argument; nothing between them reassigns what they read.

**A pair under one mask** (``x_ptr + offs * 2`` and ``x_ptr + offs * 2 + 1``, both ``mask=offs < n``: FlagGems'
complex ops, alf's diagonal SSM) gets a ``[..., 2]`` tile instead: ``tl.expand_dims(p, -1) + tl.arange(0, 2)``,
the mask broadcast along the new dimension, ``tl.split`` (a store: ``tl.join``). Exact for any address; the lanes
then hold both elements of their pair (fp32 on sm_90: ``ld.global.v2.b32`` for two ``ld.global.b32``). Only where
the address scales an index built on ``tl.arange`` by 2 (``x + offs`` and ``x + offs + 1`` are a shifted tile).
"""

from __future__ import annotations

import ast
import re
import textwrap

import libcst as cst

from tritondx.tools.evidence.triage_patterns import single_assignments, steps_by_two
from tritondx.tools.rewrite.base import Proposal, RewriteContext, rewrite
from tritondx.tools.rewrite.cst_util import (
    assignments,
    code_of,
    dotted,
    jit_functions,
    kwarg,
    parse,
    replace_functions,
)

#: the detectors whose findings motivate it: the IR tier's lane-stride check and the source triage's pair
ANSWERS = ("uncoalesced_access", "interleaved_pair")
PREFIX = "_tdx_pair"


def _assigns(fn: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    return assignments(fn, augmented=True, unpacked=True)


def _pair_index(e: cst.BaseExpression) -> tuple[str, str] | None:
    """``(start, H)`` of ``start + tl.arange(0, H) * 2`` (either order, ``2 * tl.arange``, no start: ``0``)."""
    def doubled(x: cst.BaseExpression) -> str | None:
        if isinstance(x, cst.BinaryOperation) and isinstance(x.operator, cst.Multiply):
            for a, b in ((x.left, x.right), (x.right, x.left)):
                if isinstance(b, cst.Integer) and b.value == "2" and isinstance(a, cst.Call) \
                        and dotted(a.func) == "tl.arange" and len(a.args) == 2 and code_of(a.args[0].value) == "0":
                    return code_of(a.args[1].value)
        return None
    h = doubled(e)
    if h is not None:
        return "0", h
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        for a, b in ((e.left, e.right), (e.right, e.left)):
            h = doubled(b)
            if h is not None:
                return code_of(a), h
    return None


def _norm(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _term(addr: str, p: str) -> tuple[str, str, str] | None:
    """``(term, stride, index)``: the address's one use of the pair index ``p`` (``p`` or ``p[None, :]``), with the
    stride it is multiplied by (``1`` where none)."""
    idx = r"(?:\[\s*None\s*,\s*:\s*\])?"
    uses = re.findall(rf"(?<![\w.]){re.escape(p)}\b(\s*\[[^\]]*\])?", addr)
    if len(uses) != 1 or (uses[0] and _norm(uses[0]) != "[None,:]"):
        return None
    index = "[None, :]" if uses[0] else ""

    def summand(m: re.Match) -> bool:   # a whole ``+`` term: ``a * b * p`` scales p by ``a * b``, ``- s * p`` by -s
        before, after = addr[:m.start()].rstrip(), addr[m.end():].lstrip()
        return (not before or before[-1] in "+(") and (not after or after[0] in "+-)")
    for pat in (rf"(?<![\w.])([\w.]+)\s*\*\s*{re.escape(p)}{idx}", rf"(?<![\w.]){re.escape(p)}{idx}\s*\*\s*([\w.]+)"):
        m = re.search(pat, addr)
        if m:
            return (m.group(0), m.group(1), index) if summand(m) else None
    m = re.search(rf"(?<![\w.]){re.escape(p)}{idx}", addr)
    return (m.group(0), "1", index) if m and summand(m) else None


def _mask_code(mask: cst.BaseExpression | None, assigns) -> str | None:
    if mask is None:
        return None
    if isinstance(mask, cst.Name) and len(assigns.get(mask.value, [])) == 1:
        return code_of(assigns[mask.value][0])
    return code_of(mask)


def _moved_on(m1: str, m2: str, p: str) -> bool:
    """``m2`` is ``m1`` with each use of ``p`` (``p`` or ``p[None, :]``) moved one element on."""
    use = rf"(?<![\w.]){re.escape(p)}\b(?:\s*\[\s*None\s*,\s*:\s*\])?"
    pieces = [lambda m: f"(1 + {m.group(0)})", lambda m: f"({m.group(0)} + 1)", lambda m: f"1 + {m.group(0)}",
              lambda m: f"{m.group(0)} + 1"]
    return any(_norm(re.sub(use, f, m1)) == _norm(m2) for f in pieces)


#: the arguments an access may have for the rewrite to keep its meaning (another, a cache or eviction hint, would
#: be dropped): ``tl.load(ptr, mask, other)``, ``tl.store(ptr, value, mask)``
ARGS = {"load": ("pointer", "mask", "other"), "store": ("pointer", "value", "mask")}


def _load_value(v: cst.BaseExpression) -> tuple[cst.Call, str] | None:
    """``(the tl.load call, what follows it)`` of ``tl.load(...)`` or ``tl.load(...).to(dtype)``."""
    if isinstance(v, cst.Call) and dotted(v.func) == "tl.load" and v.args:
        return v, ""
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "to" and \
            isinstance(v.func.value, cst.Call) and dotted(v.func.value.func) == "tl.load" and v.func.value.args:
        return v.func.value, ".to(" + ", ".join(code_of(a) for a in v.args) + ")"
    return None


def _pair_stmt(st: cst.BaseStatement) -> tuple[str, cst.Call, str | None] | None:
    """``(kind, call, target)`` of a statement ``t = tl.load(...)`` (``.to(...)`` after it: kind ``load<suffix>``)
    or ``tl.store(...)`` with only ``ARGS``."""
    if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
        return None
    s = st.body[0]
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name) and \
            (lv := _load_value(s.value)) is not None:
        kind, call, target = "load" + lv[1], lv[0], s.targets[0].target.value
    elif isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and dotted(s.value.func) == "tl.store" and \
            len(s.value.args) >= 2:
        kind, call, target = "store", s.value, None
    else:
        return None
    allowed = ARGS[kind[:4] if kind.startswith("load") else kind]
    if len(call.args) > 3 or any(a.keyword is not None and a.keyword.value not in allowed or a.star
                                 for a in call.args):
        return None
    return kind, call, target


def _written_between(body, i: int, j: int) -> set[str]:
    return set().union(*(_assigns(st) for st in body[i + 1:j]))


def _read_between(body, i: int, j: int) -> set[str]:
    return set().union(*(_names(code_of(st)) for st in body[i + 1:j]))


def _names(code: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", code))


def _block_pairs(body: list, assigns, pair_idx, counter: list[int], what: list[str], once) -> list | None:
    """``body`` with each pair of its accesses made one access (flat tile or ``[..., 2]`` tile); None: none."""
    stmts = [(i, r) for i, st in enumerate(body) if (r := _pair_stmt(st)) is not None]
    replace: dict[int, list[cst.BaseStatement]] = {}
    for a, (i, (kind, c1, t1)) in enumerate(stmts):
        ptr = code_of(c1.args[0].value)
        if i in replace:
            continue
        for j, (kind2, c2, t2) in stmts[a + 1:]:
            if kind2 != kind or j in replace or _norm(code_of(c2.args[0].value)) not in (
                    f"{_norm(ptr)}+1", f"1+{_norm(ptr)}", f"({_norm(ptr)})+1"):
                continue
            load, suffix = kind.startswith("load"), kind[4:] if kind.startswith("load") else ""
            mpos = 1 if load else 2
            m1, m2 = (_mask_code(kwarg(c, "mask", mpos), assigns) for c in (c1, c2))
            other = [kwarg(c, "other", 2) for c in (c1, c2)] if load else [None, None]
            if (other[0] is None) != (other[1] is None) or (m1 is None) != (m2 is None) or \
                    (other[0] is not None and _norm(code_of(other[0])) != _norm(code_of(other[1]))):
                break
            flat = None
            if re.fullmatch(r"[A-Za-z_]\w*", ptr) and len(assigns.get(ptr, [])) == 1:
                addr = code_of(assigns[ptr][0])
                hit = next(((p, t) for p in pair_idx if (t := _term(addr, p)) is not None), None)
                if hit is not None and (m1 is None or _moved_on(m1, m2, hit[0])):
                    flat = (addr, hit)
            same_mask = m1 is None or _norm(m1) == _norm(m2)
            if flat is None and not (same_mask and steps_by_two(ast.parse(ptr, mode="eval").body, once)):
                break
            addr = flat[0] if flat else ptr
            # what the new access reads stays as it was: assigned once, or not written between the two accesses
            between = _written_between(body, i, j)
            reads = _names(addr) | _names(m1 or "") | _names(code_of(c1))
            if any(len(assigns.get(x, [])) > 1 for x in _names(addr) | _names(m1 or "")) and flat or between & reads:
                break
            if load and (t1 == t2 or {t1, t2} & (between | _read_between(body, i, j))):
                break
            n = counter[0]
            counter[0] += 1
            lines = _flat_lines(n, suffix, c1, c2, t1, t2, m1, other[0], flat[0], *flat[1], *pair_idx[flat[1][0]]) \
                if flat else _tile_lines(n, suffix, c1, c2, t1, t2, ptr, kwarg(c1, "mask", mpos), other[0])
            stmts_new = [cst.parse_statement(x + "\n") for x in lines]
            # the comments and blank lines above the two accesses stay above the one that replaces them
            stmts_new[0] = stmts_new[0].with_changes(leading_lines=[*body[i].leading_lines, *body[j].leading_lines])
            if load:
                replace[i], replace[j] = stmts_new, []
            else:
                replace[i], replace[j] = [], stmts_new
            what.append(f"{'load' if load else 'store'} {ptr} / + 1 as one {'flat' if flat else '[..., 2]'} tile")
            break
    out, changed = [], bool(replace)
    for i, st in enumerate(body):
        if i in replace:
            out += replace[i]
            continue
        inner = _nested(st, assigns, pair_idx, counter, what, once)
        changed = changed or inner is not st
        out.append(inner)
    return out if changed else None


def _nested(st, assigns, pair_idx, counter, what, once):
    """A compound statement (``for``, ``while``, ``if``) with its blocks' pairs made one access."""
    if isinstance(st, (cst.For, cst.While, cst.If)) and isinstance(st.body, cst.IndentedBlock):
        new = _block_pairs(list(st.body.body), assigns, pair_idx, counter, what, once)
        if new is not None:
            st = st.with_changes(body=st.body.with_changes(body=new))
        orelse = getattr(st, "orelse", None)
        if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
            new = _block_pairs(list(orelse.body.body), assigns, pair_idx, counter, what, once)
            if new is not None:
                st = st.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(body=new)))
        elif isinstance(orelse, cst.If):
            st = st.with_changes(orelse=_nested(orelse, assigns, pair_idx, counter, what, once))
    return st


def _flat_lines(n, suffix, c1, c2, t1, t2, m1, other, addr, p, term_hit, start, half) -> list[str]:
    """One flat tile along the pair axis: ``start + j`` for ``j < 2 * half`` (module docstring)."""
    term, stride, index = term_hit
    jn, nn, pn, vn = (f"{PREFIX}{n}_{x}" for x in ("j", "n", "ptr", "v"))
    use = rf"(?<![\w.]){re.escape(p)}\b(?:\s*\[\s*None\s*,\s*:\s*\])?"
    flat_term = f"{nn}{index}" if stride == "1" else \
        f"({stride} * {nn}{index} + (1 - {stride}) * ({jn} % 2){index})"
    lines = [f"{jn} = tl.arange(0, 2 * ({half}))",
             f"{nn} = {start} + {jn}  # the pair axis as one flat index (pairs interleaved in memory)",
             f"{pn} = {addr.replace(term, flat_term, 1)}"]
    mask_kw = f", mask={re.sub(use, f'{nn}{index}', m1)}" if m1 is not None else ""
    if t1 is not None:   # a load (``suffix``: the ``.to(...)`` after it)
        other_kw = f", other={code_of(other)}" if other is not None else ""
        lead = "" if not index else f"{vn}.shape[0], "
        return lines + [f"{vn} = tl.load({pn}{mask_kw}{other_kw}){suffix}",
                        f"{t1}, {t2} = tl.split(tl.reshape({vn}, [{lead}{half}, 2]))"]
    va, vb = code_of(c1.args[1].value), code_of(c2.args[1].value)
    an, bn = f"{PREFIX}{n}_a", f"{PREFIX}{n}_b"
    lead = "" if not index else f"{an}.shape[0], "
    return [f"{an} = {va}", f"{bn} = {vb}"] + lines + [
        f"tl.store({pn}, tl.reshape(tl.join({an}, {bn}), [{lead}2 * ({half})]){mask_kw})"]


def _tile_lines(n, suffix, c1, c2, t1, t2, ptr, mask, other) -> list[str]:
    """One ``[..., 2]`` tile: the pair's two pointers side by side (``ptr`` and ``ptr + 1`` along a new last
    dimension of 2), the one mask broadcast along it; ``tl.split`` / ``tl.join`` take it apart / build it."""
    pn, vn = f"{PREFIX}{n}_ptr", f"{PREFIX}{n}_v"
    lines = [f"{pn} = tl.expand_dims({ptr}, -1) + tl.arange(0, 2)  # the pair side by side (interleaved in memory)"]
    mask_kw = f", mask=tl.expand_dims({code_of(mask)}, -1)" if mask is not None else ""
    if t1 is not None:   # a load (``suffix``: the ``.to(...)`` after it)
        other_kw = f", other={code_of(other)}" if other is not None else ""
        return lines + [f"{vn} = tl.load({pn}{mask_kw}{other_kw}){suffix}", f"{t1}, {t2} = tl.split({vn})"]
    va, vb = code_of(c1.args[1].value), code_of(c2.args[1].value)
    return lines + [f"tl.store({pn}, tl.join({va}, {vb}){mask_kw})"]


def kernel_source(source: str, kernel: str) -> tuple[str, str] | None:
    """The source with ``kernel``'s interleaved pairs read and written as one access each, and what changed; None
    where no pair fits the preconditions (module docstring)."""
    module = parse(source)
    fn = jit_functions(module).get(kernel)
    if fn is None or not isinstance(fn.body, cst.IndentedBlock):
        return None
    assigns = _assigns(fn)
    pair_idx = {n: pi for n, vs in assigns.items() if len(vs) == 1 and (pi := _pair_index(vs[0])) is not None}
    what: list[str] = []
    once = single_assignments(ast.parse(textwrap.dedent(code_of(fn))).body[0])   # the triage's reading of the kernel
    new = _block_pairs(list(fn.body.body), assigns, pair_idx, [0], what, once)
    if new is None or not what:
        return None
    new_fn = fn.with_changes(body=fn.body.with_changes(body=new))
    return replace_functions(module, {kernel: new_fn}).code, f"{kernel}: " + "; ".join(what)


@rewrite("deinterleave", "an interleaved pair read or written as two strided tensors (x_ptrs, x_ptrs + 1) -> one "
                         "flat tile split with tl.split / joined with tl.join", priority=8)
def deinterleave(ctx: RewriteContext) -> list[Proposal]:
    motivating = ctx.motivating("deinterleave", ANSWERS)
    return ctx.per_kernel("deinterleave", motivating, [()], kernel_source, lambda k: {"kernel": k},
                          "the pair's accesses become contiguous where the pair axis has stride 1: fewer, wider "
                          "memory transactions")
