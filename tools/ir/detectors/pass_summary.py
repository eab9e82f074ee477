"""The per-pass change summary of a kernel's compile (``pass_changes``) and the ``pass_summary`` detector that
reports it."""

from __future__ import annotations

import difflib
import re
from collections import Counter

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.records.evidence import Finding


# Location alias lines are not IR content for the diff:
#   #loc12 = loc("/work/main/examples/add_tiny_block.py":18:37)
_DIFF_DROP_RE = re.compile(r"^#loc\d*\s*=")


# Attribute alias definitions (expanded inline so alias and inline printing compare equal):
#   #blocked1 = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
_ALIAS_DEF_RE = re.compile(r"^(?P<name>#[A-Za-z_][\w]*)\s*=\s*(?P<body>#.*)$")


# A reference to an alias:  tensor<1024xi32, #blocked1>
_ALIAS_REF_RE = re.compile(r"#[A-Za-z_][\w]*")


# SSA value names (all replaced by %v: passes rename freely and the pipeliner's internal dumps print %0, %arg0):
#   %offs_2      %acc_57#0      %arg10
_SSA_NAME_RE = re.compile(r"%[\w$.\-]+")


# Layout definitions and loop headers that make up the "structure" the summary reports:
#   %acc_57:7 = scf.for %acc_59 = %c0_i32 to %K step %c32_i32 iter_args(...) -> (...) : i32 {
_LOOP_HEAD_RE = re.compile(r"\bscf\.(?:for|while)\b")


def _strip_locs(line: str) -> str:
    """Remove every ``loc(...)`` (balanced parentheses) from a line."""
    out, i = [], 0
    while True:
        j = line.find("loc(", i)
        if j < 0 or (j > 0 and (line[j - 1].isalnum() or line[j - 1] == "_")):
            if j < 0:
                out.append(line[i:])
                break
            out.append(line[i:j + 4])
            i = j + 4
            continue
        out.append(line[i:j])
        depth, k = 0, j + 3
        while k < len(line):
            if line[k] == "(":
                depth += 1
            elif line[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    return "".join(out).rstrip()


def _normalize_dump(text: str) -> list[str]:
    """A pass dump as comparable lines: no locations, aliases expanded, every SSA value name replaced by %v."""
    aliases: dict[str, str] = {}
    body = []
    for ln in text.splitlines():
        if not ln.strip() or _DIFF_DROP_RE.match(ln):
            continue
        m = _ALIAS_DEF_RE.match(ln)
        if m and not ln.startswith("#loc"):
            aliases[m.group("name")] = m.group("body")
            continue
        body.append(ln)
    for _ in range(3):  # aliases may refer to aliases (dot_op parent = #blocked)
        prev = dict(aliases)
        aliases = {k: _ALIAS_REF_RE.sub(lambda m, a=prev: a.get(m.group(0), m.group(0)), v) for k, v in prev.items()}
    out = []
    for ln in body:
        ln = _strip_locs(ln).strip()
        ln = _ALIAS_REF_RE.sub(lambda m: aliases.get(m.group(0), m.group(0)), ln)
        out.append(_SSA_NAME_RE.sub("%v", ln))
    return out


# A base layout written out (alias definition or inline); its body names no other layout:
#   #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
_BASE_LAYOUT_RE = re.compile(r"#(?:ttg|ttng)\.(?P<kind>\w+)<\{(?P<body>[^{}#]*)\}>")


# Control flow after SCF lowering (loops no longer exist as ops):  cf.cond_br %12, ^bb1, ^bb2
_CFG_RE = re.compile(r"\bcf\.(?:cond_)?br\b")


def _structure(lines: list[str]) -> tuple[tuple, tuple]:
    """(loop signature, layout signature) of one normalized dump."""
    loops = []
    cvt = alloc = 0
    layouts = set()
    for ln in lines:
        if _LOOP_HEAD_RE.search(ln):
            loops.append(ln.count(" = %") if "iter_args" in ln else 0)
        for m in _BASE_LAYOUT_RE.finditer(ln):
            if m.group("kind") != "shared_memory":
                layouts.add((m.group("kind"), m.group("body")))
        cvt += "ttg.convert_layout" in ln
        alloc += "ttg.local_alloc" in ln
    return tuple(loops), (tuple(sorted(layouts)), cvt, alloc)


def pass_changes(k: KernelIR) -> list[tuple[str, int]]:
    """(pass name, changed lines) for every pass in the dump, in order.

    The changes of a pass are the lines that differ (difflib; a replaced line counts once; for dumps over
    3000 lines, the unmatched lines of the two line multisets) between the IR
    dumped before it and the IR dumped before the next pass, both normalized: locations dropped, attribute
    aliases (``#blocked1``) expanded inline and every SSA value name replaced by ``%v``, so that a pass
    that only renames values or prints differently (the pipeliner's internal dumps) counts 0, and a line
    counts as changed when its op, attributes or types change (not when only its operands are rewired). The software pipeliner's internal dumps are attributed to
    their sub-step (``SoftwarePipeliner.LowerLoops`` ...) and the rest of the pipeliner to the enclosing
    pass. The last pass has no dump after it and is not listed.
    """
    cache = k.__dict__.setdefault("_tdx_pass_changes", {})
    if "changes" in cache:
        return cache["changes"]
    ps = k.passes
    out: list[tuple[str, int]] = []
    flags: list[tuple[bool, bool]] = []
    enclosing = None
    prev_lines = _normalize_dump(ps[0].text) if ps else []
    prev_struct = _structure(prev_lines) if ps else None
    for i in range(len(ps) - 1):
        a, b = ps[i], ps[i + 1]
        if not a.name.startswith("SoftwarePipeliner."):
            enclosing = a.name
        if b.name.startswith("SoftwarePipeliner."):
            name = b.name
        elif a.name.startswith("SoftwarePipeliner."):
            name = enclosing or a.name
        else:
            name = a.name
        cur_lines = _normalize_dump(b.text)
        if cur_lines == prev_lines:
            changed = 0
        elif max(len(prev_lines), len(cur_lines)) <= 3000:
            sm = difflib.SequenceMatcher(None, prev_lines, cur_lines, autojunk=False)
            changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")
        else:  # LLVM-dialect dumps run to tens of thousands of lines: count unmatched lines instead
            ca, cb = Counter(prev_lines), Counter(cur_lines)
            changed = max(sum((ca - cb).values()), sum((cb - ca).values()))
        struct = _structure(cur_lines)
        lowered = "llvm.func" in b.text or bool(_CFG_RE.search(b.text))  # below TTGIR: no loops/layouts to compare
        flags.append((not lowered and struct[0] != prev_struct[0], not lowered and struct[1] != prev_struct[1]))
        out.append((name, changed))
        prev_lines, prev_struct = cur_lines, struct
    cache["changes"], cache["flags"] = out, flags
    return out


def pass_structure_changes(k: KernelIR) -> tuple[list[str], list[str]]:
    """(passes that changed the loop structure, passes that changed layouts), TTGIR-level passes only."""
    changes = pass_changes(k)
    flags = k.__dict__["_tdx_pass_changes"]["flags"]
    loops = list(dict.fromkeys(n for (n, c), (lp, _) in zip(changes, flags) if lp and c))
    lays = list(dict.fromkeys(n for (n, c), (_, ly) in zip(changes, flags) if ly and c))
    return loops, lays


@detector("pass_summary", "compiler", ("passes",), (),
          "per-pass summary: which passes changed the IR (changed lines per pass) and which changed the loop "
          "structure or the layouts", targets=("cuda",))
def _pass_summary(det: Detector, k: KernelIR) -> list[Finding]:
    """`pass_changes(k)` diffs consecutive per-pass dumps (normalized: no locations, aliases expanded, SSA
    names erased) and counts changed lines per pass. The finding (info) names the TTGIR-level passes
    that changed the loop structure (scf.for/while headers and their iter_args) or the layouts (the set
    of layouts written out, convert_layout and local_alloc counts). Silent when no pass changed either."""
    changes = pass_changes(k)
    if not changes:
        return []
    loops, lays = pass_structure_changes(k)
    if not loops and not lays:
        return []
    per_pass = Counter()
    for n, c in changes:
        per_pass[n] += c
    top = ", ".join(f"{n} ({c})" for n, c in per_pass.most_common(5) if c)
    msg = []
    if loops:
        msg.append("loop structure changed by " + ", ".join(loops))
    if lays:
        msg.append("layouts changed by " + ", ".join(lays))
    return [det.finding(k, "; ".join(msg) + f". Most changed lines: {top}", None, stage="passes", severity="info",
                        passes=len(changes), changed_passes=sum(1 for _, c in changes if c),
                        loop_passes=",".join(loops), layout_passes=",".join(lays))]
