"""Parsers for Triton's IR stages with source-line attribution.

MLIR stages (TTIR, TTGIR) carry ``loc`` attributes; PTX carries ``.loc`` directives; SASS from
``nvdisasm -g`` carries ``//## File "...", line N`` comments. Each parser maps IR lines to the
task's source lines so findings can quote both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Location definition in MLIR:
#   #loc2 = loc("/work/main/examples/matmul_no_dot.py":15:26)
MLIR_LOC_DEF_RE = re.compile(r'^(#loc\d*) = loc\("(?P<file>[^"]+)":(?P<line>\d+):(?P<col>\d+)\)')
# Named or call-site location pointing at another alias:
#   #loc21 = loc("pid"(#loc2))      #loc30 = loc(callsite(#loc5 at #loc6))
MLIR_LOC_ALIAS_RE = re.compile(r'^(#loc\d*) = loc\((?:"[^"]*")?\(?(?:callsite\()?(#loc\d*)')
# Reference at the end of an op:
#   %x_5 = tt.load %x_4, %mask_3 : tensor<128x!tt.ptr<f32>, #blocked> loc(#loc27)
MLIR_LOC_REF_RE = re.compile(r'loc\((#loc\d*)\)\s*$')
# Inline file location at the end of an op (some dumps print locations inline):
#   tt.return loc("/work/main/examples/add_tiny_block.py":20:4)
MLIR_LOC_INLINE_RE = re.compile(r'loc\("(?P<file>[^"]+)":(?P<line>\d+):(?P<col>\d+)\)\s*$')
# PTX file table and line directives:
#   .file	1 "/work/main/examples/add_tiny_block.py"
#   .loc	1 14 17                         // add_tiny_block.py:14:17
PTX_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
PTX_LOC_RE = re.compile(r'^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)')
# SASS line comments from nvdisasm -g:
#   //## File "/work/main/examples/add_tiny_block.py", line 14
SASS_LOC_RE = re.compile(r'//## File "(?P<file>[^"]+)", line (?P<line>\d+)')
# SASS instruction:
#   /*00c0*/                   SHF.L.U32 R0, R0, 0x2, RZ ;
SASS_INSN_RE = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(?P<insn>[^;]+);')


@dataclass
class IRLine:
    """One IR line with the source position it maps to (None when unknown)."""

    index: int
    text: str
    src_line: int | None = None
    src_file: str | None = None


@dataclass
class IRModule:
    stage: str
    lines: list[IRLine] = field(default_factory=list)

    def find(self, pattern: re.Pattern) -> list[IRLine]:
        return [ln for ln in self.lines if pattern.search(ln.text)]


def _resolve_mlir_locs(text: str) -> dict[str, tuple[str, int]]:
    direct: dict[str, tuple[str, int]] = {}
    alias: dict[str, str] = {}
    for raw in text.splitlines():
        m = MLIR_LOC_DEF_RE.match(raw)
        if m:
            direct[m.group(1)] = (m.group("file"), int(m.group("line")))
            continue
        m = MLIR_LOC_ALIAS_RE.match(raw)
        if m:
            alias[m.group(1)] = m.group(2)
    resolved = dict(direct)
    for name in alias:
        seen, cur = set(), name
        while cur in alias and cur not in resolved and cur not in seen:
            seen.add(cur)
            cur = alias[cur]
        if cur in resolved:
            resolved[name] = resolved[cur]
    return resolved


def parse_mlir(text: str, stage: str) -> IRModule:
    locs = _resolve_mlir_locs(text)
    mod = IRModule(stage=stage)
    for i, raw in enumerate(text.splitlines()):
        if raw.startswith("#"):
            continue
        line = IRLine(index=i, text=raw.strip())
        m = MLIR_LOC_REF_RE.search(raw)
        if m and m.group(1) in locs:
            line.src_file, line.src_line = locs[m.group(1)]
        else:
            m2 = MLIR_LOC_INLINE_RE.search(raw)
            if m2:
                line.src_file, line.src_line = m2.group("file"), int(m2.group("line"))
        mod.lines.append(line)
    return mod


def parse_ptx(text: str) -> IRModule:
    files: dict[str, str] = {}
    mod = IRModule(stage="ptx")
    cur: tuple[str, int] | None = None
    for i, raw in enumerate(text.splitlines()):
        m = PTX_FILE_RE.match(raw)
        if m:
            files[m.group(1)] = m.group(2)
            continue
        m = PTX_LOC_RE.match(raw)
        if m:
            cur = (files.get(m.group(1), m.group(1)), int(m.group(2)))
            continue
        s = raw.strip()
        if not s or s.startswith("//"):
            continue
        ln = IRLine(index=i, text=s)
        if cur:
            ln.src_file, ln.src_line = cur
        mod.lines.append(ln)
    # file table usually comes last in PTX: resolve file ids now
    for ln in mod.lines:
        if ln.src_file in files:
            ln.src_file = files[ln.src_file]
    return mod


def parse_sass(text: str) -> IRModule:
    mod = IRModule(stage="sass")
    cur: tuple[str, int] | None = None
    for i, raw in enumerate(text.splitlines()):
        m = SASS_LOC_RE.search(raw)
        if m:
            cur = (m.group("file"), int(m.group("line")))
            continue
        m = SASS_INSN_RE.search(raw)
        if m:
            ln = IRLine(index=i, text=m.group("insn").strip())
            if cur:
                ln.src_file, ln.src_line = cur
            mod.lines.append(ln)
    return mod


def parse_stage(stage: str, text: str) -> IRModule:
    if stage in ("ttir", "ttgir"):
        return parse_mlir(text, stage)
    if stage == "ptx":
        return parse_ptx(text)
    if stage == "sass":
        return parse_sass(text)
    mod = IRModule(stage=stage)
    mod.lines = [IRLine(index=i, text=t) for i, t in enumerate(text.splitlines())]
    return mod


# Per-pass dump header printed with MLIR_ENABLE_DUMP=1:
#   // -----// IR Dump Before TritonGPUCoalesce (tritongpu-coalesce) ('builtin.module' operation) //----- //
PASS_HEADER_RE = re.compile(r"^// -----// (?:IR Dump Before (?P<name>\S+) \((?P<arg>[^)]*)\)|"
                            r"SoftwarePipeliner internal IR Dump After: (?P<internal>\S+))")


@dataclass
class PassDump:
    index: int
    name: str
    arg: str
    text: str


def split_passes(text: str) -> list[PassDump]:
    """Split an MLIR_ENABLE_DUMP log into the IR before each pass (in order)."""
    dumps: list[PassDump] = []
    cur_name, cur_arg, buf = None, "", []
    for raw in text.splitlines():
        m = PASS_HEADER_RE.match(raw)
        if m:
            if cur_name is not None:
                dumps.append(PassDump(len(dumps), cur_name, cur_arg, "\n".join(buf)))
            cur_name = m.group("name") or f"SoftwarePipeliner.{m.group('internal')}"
            cur_arg = m.group("arg") or ""
            buf = []
        elif cur_name is not None:
            buf.append(raw)
    if cur_name is not None:
        dumps.append(PassDump(len(dumps), cur_name, cur_arg, "\n".join(buf)))
    return dumps


# cuobjdump --dump-resource-usage line:
#   Function axpy_kernel:
#   REG:16 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
RESOURCE_RE = re.compile(r"REG:(?P<reg>\d+)\s+STACK:(?P<stack>\d+)\s+SHARED:(?P<shared>\d+)\s+LOCAL:(?P<local>\d+)")
