"""The one reader of printed MLIR (TTIR, TTGIR, the Ascend adapter IR), shared by the CUDA stage parsers
(``parse``, ``ssa``) and the Ascend region view (``tools/npu/adapter_ir.py``).

It reads text, not an MLIR parser: the top-level splitter (``split_top``), the head of an op line (results,
op name, the rest: ``op_head``), the location at the end of a line (``trailing_loc``), the location aliases
of a module (``loc_defs``) and the frames a location stands for (``loc_frames``: file locations through
``callsite``, ``fused`` and named locations, innermost first). Which frame a finding cites is the caller's
choice (``parse.pick_frame`` for CUDA, ``adapter_ir.IRModule.resolve_loc`` for Ascend).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A location alias definition, whatever its body (file, name, callsite, fused, unknown):
#   #loc2 = loc("/work/main/examples/matmul_no_dot.py":15:26)      #loc35 = loc(callsite(#loc16 at #loc33))
LOC_DEF_RE = re.compile(r"^\s*(?P<name>#loc\d*)\s*=\s*loc\((?P<body>.*)\)\s*$")
# The body of a file location:
#   "/work/task.py":9:4
FILE_LOC_RE = re.compile(r'^"(?P<file>(?:[^"\\]|\\.)*)":(?P<line>\d+):(?P<col>\d+)$')
# A named location wrapping another one:
#   "x_ptr"(#loc2)
NAMED_LOC_RE = re.compile(r'^"(?:[^"\\]|\\.)*"\((?P<inner>.*)\)$')
# A reference to a location alias at the end of an op (or of a region's closing line):
#   %x_5 = tt.load %x_4, %mask_3 : tensor<128x!tt.ptr<f32>, #blocked> loc(#loc27)      } {ExtractedLoadOrStore} loc(#loc3)
LOC_REF_RE = re.compile(r"\sloc\((?P<ref>#loc\d*)\)\s*$")
# An inline file location at the end of an op:
#   %11 = arith.index_cast %arg5 : i32 to index loc("/work/task.py":6:15)
INLINE_LOC_RE = re.compile(r'\sloc\((?P<ref>"(?:[^"\\]|\\.)*":\d+:\d+)\)\s*$')
# The head of an op line: results (one, a multi-result group ``%x:2``, or a comma list), the op name (dotted,
# quoted generic form, ``return``, ``module``), the rest:
#   %17 = scf.for %arg12 = %c0 to %c1024 step %c1 iter_args(%arg13 = %0) -> (tensor<1024xf32>) {
#   %acc_57:7 = scf.for %acc_59 = %c0_i32 to %K step %c32_i32 iter_args(%arg10 = %cst, ...) -> (...) : i32 {
#   %a, %b = "tt.reduce"(%x) <{axis = 0 : i32}> ({
#   tt.store %14, %12, %6 : tensor<1024x!tt.ptr<f32>> loc(#loc12)
OP_RE = re.compile(r'^\s*(?:(?P<results>%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+(?::\d+)?)*)\s*=\s*)?'
                   r'(?P<name>"[\w.$-]+"|[a-z_][\w$]*(?:\.[\w$]+)+|return|module)(?=[\s(<{]|$)(?P<rest>.*)$')
# A string literal (stripped before counting braces or reading attributes):
#   "/work/task.py"      "aiv"
STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')

_OPEN, _CLOSE = "([<{", ")]>}"


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split on ``sep`` where it is outside brackets (``()[]<>{}``) and string literals; the parts
    stripped, empty ones dropped. ``split_top("%a: i32 loc(#l), %b: !tt.ptr<f32>")`` gives the two arguments;
    ``split_top("#loc1 at callsite(#loc2 at #loc3)", " at ")`` gives callee and caller."""
    parts: list[str] = []
    depth, start, i, in_str = 0, 0, 0, False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def strip_strings(text: str) -> str:
    """``text`` with every string literal emptied (``"a{b"`` -> ``""``)."""
    return STRING_RE.sub('""', text)


def brace_delta(line: str) -> int:
    """Regions a line opens (positive) or closes (negative), string literals left out."""
    t = strip_strings(line)
    return t.count("{") - t.count("}")


@dataclass(frozen=True)
class OpHead:
    """What ``op_head`` reads from an op line: result names (with ``%``, a group's count left out), the op
    name (quotes of the generic form removed) and the text after the name."""

    results: list[str]
    name: str
    rest: str


def op_head(line: str) -> OpHead | None:
    """The head of an op line (see ``OP_RE``), None for a line that is not an op."""
    m = OP_RE.match(line)
    if not m:
        return None
    results = [r.strip().split(":")[0] for r in m.group("results").split(",")] if m.group("results") else []
    return OpHead(results, m.group("name").strip('"'), m.group("rest"))


def trailing_loc(line: str) -> str | None:
    """The location at the end of an op line: ``#locN``, an inline file location, or the balanced body of a
    compound one (``loc(callsite(#loc1 at #loc2))``); None when the line ends otherwise."""
    m = LOC_REF_RE.search(line) or INLINE_LOC_RE.search(line)
    if m:
        return m.group("ref")
    s = line.rstrip()
    if not s.endswith(")"):
        return None
    depth = 0
    for pos in range(len(s) - 1, -1, -1):
        ch = s[pos]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return s[pos + 1:-1].strip() if s[max(0, pos - 4):pos] == " loc" else None
    return None


def loc_defs(text: str) -> dict[str, str]:
    """Every location alias of a module (``#locN`` -> its body), wherever the printer put it."""
    return {m.group("name"): m.group("body") for m in map(LOC_DEF_RE.match, text.splitlines()) if m}


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int = 0


def loc_frames(body: str | None, defs: dict[str, str], *, first_fused: bool = False,
               memo: dict[str, list[SourceLoc]] | None = None,
               _active: set[str] | None = None) -> list[SourceLoc]:
    """The file locations one location body stands for, innermost first.

    Reads ``"file":L:C``, ``"name"(<loc>)``, ``callsite(<callee> at <caller>)`` (callee's frames, then the
    caller's), ``fused[<a>, ...]`` (also ``fused<...>[...]``: every part's frames, or with ``first_fused``
    the first part that has any), ``#locN`` references (through ``defs``; a circle gives none) and
    ``unknown``. ``memo`` keeps the frames of each alias between calls."""
    if body is None:
        return []
    memo = {} if memo is None else memo
    active = set() if _active is None else _active
    body = body.strip()
    if body.startswith("loc(") and body.endswith(")"):
        body = body[4:-1].strip()

    def again(part: str) -> list[SourceLoc]:
        return loc_frames(part, defs, first_fused=first_fused, memo=memo, _active=active)

    if body.startswith("#loc"):
        name = body.split()[0]
        if name in memo:
            return memo[name]
        if name in active or name not in defs:
            return []
        active.add(name)
        frames = again(defs[name])
        active.discard(name)
        memo[name] = frames
        return frames
    m = FILE_LOC_RE.match(body)
    if m:
        return [SourceLoc(m.group("file"), int(m.group("line")), int(m.group("col")))]
    if body.startswith("callsite(") and body.endswith(")"):
        parts = split_top(body[len("callsite("):-1], " at ")
        return again(parts[0]) + again(parts[1]) if len(parts) == 2 else []
    if body.startswith("fused"):
        start = body.find("[")
        if start < 0 or not body.endswith("]"):
            return []
        frames: list[SourceLoc] = []
        for part in split_top(body[start + 1:-1]):
            got = again(part)
            if got and first_fused:
                return got
            frames += got
        return frames
    m = NAMED_LOC_RE.match(body)
    if m:
        return again(m.group("inner"))
    return []
