"""Parsers for Triton's IR stages with source-line attribution.

MLIR stages (TTIR, TTGIR) carry ``loc`` attributes; PTX carries ``.loc`` directives; SASS from
``nvdisasm -g`` carries ``//## File "...", line N`` comments. Each parser maps IR lines to the
task's source lines so findings can quote both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tritondx.tools.ir.mlir import SourceLoc, loc_defs, loc_frames, trailing_loc

# Source files that belong to Triton itself (tl.sum, tl.max ... are inlined from triton/language/standard.py):
#   /work/venv-probe/lib/python3.11/site-packages/triton/language/standard.py
TRITON_LIB_PATH_RE = re.compile(r"[/\\](?:site|dist)-packages[/\\]triton[/\\]|[/\\]triton[/\\]language[/\\]")
# PTX file table:
#   .file	1 "/work/main/examples/add_tiny_block.py"
PTX_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
# PTX line directive (file id, line, column):
#   .loc	1 14 17                         // add_tiny_block.py:14:17
PTX_LOC_RE = re.compile(r'^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)')
# Inlined call chain that ptxas-style comments print after a .loc (innermost first, basenames only):
#   .loc	2 170 27                        // standard.py:170:27 @[ standard.py:191:40 @[ softmax_three_pass.py:19:35 ] ]
PTX_INLINED_AT_RE = re.compile(r'@\[\s*(?P<file>[^:\s\[\]]+):(?P<line>\d+):(?P<col>\d+)')
# The same chain as a directive operand (newer LLVM):
#   .loc	2 191 40, function_name $L__info_string0, inlined_at 1 19 35
PTX_INLINED_AT_DIRECTIVE_RE = re.compile(r'inlined_at\s+(?P<file>\d+)\s+(?P<line>\d+)\s+(?P<col>\d+)')
# SASS line comments from nvdisasm -g:
#   //## File "/work/main/examples/add_tiny_block.py", line 14
SASS_LOC_RE = re.compile(r'//## File "(?P<file>[^"]+)", line (?P<line>\d+)')
# nvdisasm -gi adds the call site of inlined code on the same comment:
#   //## File "/.../triton/language/standard.py", line 191 inlined at "/work/main/examples/softmax.py", line 19
SASS_INLINED_AT_RE = re.compile(r'inlined at "(?P<file>[^"]+)", line (?P<line>\d+)')
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


def is_triton_library(path: str | None) -> bool:
    """True for source files of Triton itself (inlined tl.* helpers), which a finding should not cite."""
    return bool(path) and bool(TRITON_LIB_PATH_RE.search(path))


def pick_frame(frames: list[tuple[str, int]]) -> tuple[str, int] | None:
    """The frame a finding should cite: the innermost one outside Triton's own library, else the innermost."""
    for f in frames:
        if not is_triton_library(f[0]):
            return f
    return frames[0] if frames else None


def parse_mlir(text: str, stage: str) -> IRModule:
    """TTIR/TTGIR lines (location aliases left out) with the source line of each line's trailing location
    (``mlir.trailing_loc``), the frame :func:`pick_frame` chooses among the ones it stands for."""
    defs = loc_defs(text)
    memo: dict[str, list[SourceLoc]] = {}
    mod = IRModule(stage=stage)
    for i, raw in enumerate(text.splitlines()):
        if raw.startswith("#"):
            continue
        line = IRLine(index=i, text=raw.strip())
        frame = pick_frame([(f.file, f.line) for f in
                            loc_frames(trailing_loc(raw), defs, first_fused=True, memo=memo)])
        if frame:
            line.src_file, line.src_line = frame
        mod.lines.append(line)
    return mod


def parse_ptx(text: str) -> IRModule:
    """PTX lines with the source line of the closest preceding ``.loc``.

    A ``.loc`` in Triton's own library (an inlined ``tl.sum`` ...) is attributed to the innermost call
    site outside the library, read from the ``inlined_at`` operand or the ``@[ file:line:col ]`` comment
    chain; ``.loc`` with line 0 (no line) leaves the line unmapped.
    """
    files: dict[str, str] = {}
    for raw in text.splitlines():
        m = PTX_FILE_RE.match(raw)
        if m:
            files[m.group(1)] = m.group(2)
    by_base: dict[str, str] = {}
    for path in files.values():
        by_base.setdefault(path.replace("\\", "/").rsplit("/", 1)[-1], path)
    mod = IRModule(stage="ptx")
    cur: tuple[str, int] | None = None
    for i, raw in enumerate(text.splitlines()):
        if PTX_FILE_RE.match(raw):
            continue
        m = PTX_LOC_RE.match(raw)
        if m:
            frames = [(files.get(m.group(1), m.group(1)), int(m.group(2)))]
            code, _, comment = raw.partition("//")
            for mi in PTX_INLINED_AT_DIRECTIVE_RE.finditer(code):
                frames.append((files.get(mi.group("file"), mi.group("file")), int(mi.group("line"))))
            for mi in PTX_INLINED_AT_RE.finditer(comment):
                frames.append((by_base.get(mi.group("file"), mi.group("file")), int(mi.group("line"))))
            frames = [f for f in frames if f[1] > 0]
            cur = pick_frame(frames)
            continue
        s = raw.strip()
        if not s or s.startswith("//"):
            continue
        ln = IRLine(index=i, text=s)
        if cur:
            ln.src_file, ln.src_line = cur
        mod.lines.append(ln)
    return mod


def parse_sass(text: str) -> IRModule:
    mod = IRModule(stage="sass")
    cur: tuple[str, int] | None = None
    for i, raw in enumerate(text.splitlines()):
        m = SASS_LOC_RE.search(raw)
        if m:
            frames = [(m.group("file"), int(m.group("line")))]
            frames += [(mi.group("file"), int(mi.group("line"))) for mi in SASS_INLINED_AT_RE.finditer(raw)]
            cur = pick_frame([f for f in frames if f[1] > 0])
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
