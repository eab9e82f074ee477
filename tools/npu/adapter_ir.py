"""The Ascend view of the two IR stages triton-ascend produces without CANN: TTIR and the adapter IR.

Both are MLIR in the pretty form, read with the shared MLIR reader (``tools/ir/mlir.py``: op heads,
trailing locations, location aliases). Every operation line becomes an :class:`Op` with its result names,
op name, attribute text, types and location; region nesting is tracked by brace balance so each op knows
its enclosing ops (which ``scf.for`` it sits in). Closing lines such as ``} {ExtractedLoadOrStore}
loc(#loc3)`` are attached to the op they close, because MLIR prints a region op's attributes and location
after its body.

Locations resolve (``mlir.loc_frames``) to a :class:`~tritondx.tools.ir.mlir.SourceLoc`; ``resolve_loc``
picks the frame in the task file, so each op maps to a line of the task source.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from functools import cached_property

from tritondx.tools.ir.mlir import (
    LOC_DEF_RE,
    SourceLoc,
    brace_delta,
    loc_frames,
    op_head,
    strip_strings,
    trailing_loc,
)

# --- regexes (each with an example line it matches) ---------------------------------------------

# tensor<32x64xf32>   tensor<1024x!tt.ptr<f32>>   tensor<?xf32>
TENSOR_TYPE_RE = re.compile(r"tensor<((?:(?:\d+|\?)x)*)(!tt\.ptr<[^>]+>|[a-z]\w*)")

# memref<32x64xf32>   memref<1024xf32, strided<[1], offset: ?>>   memref<?xi64>
MEMREF_TYPE_RE = re.compile(r"memref<((?:(?:\d+|\?)x)*)([a-z]\w*)")

# {ExtractedLoadOrStore, hivm.parallel_loop}   {DiscreteMemAccess}   {hivm.unlikely_condition}
ATTR_DICT_RE = re.compile(r"\{([^{}]*)\}")

# func.func @gather_kernel(...)     tt.func public @gather_kernel(...)
FUNC_NAME_RE = re.compile(r"(?:tt|func)\.func\s+(?:public\s+|private\s+)?@([\w$.]+)")

# ... attributes {..., mix_mode = "aiv", parallel_mode = "simd"}
MIX_MODE_RE = re.compile(r'mix_mode\s*=\s*"([^"]+)"')
# ... attributes {..., mix_mode = "aiv", parallel_mode = "simd"}
PARALLEL_MODE_RE = re.compile(r'parallel_mode\s*=\s*"([^"]+)"')

# (the part after "=" of)  %c1024 = arith.constant 1024 : index   /   %c64_i64 = arith.constant 64 : i64
CONST_INT_RE = re.compile(r"^\s*arith\.constant\s+(-?\d+)\s*:\s*(index|i\d+)")

# (the part after "scf.for" of)  scf.for %arg12 = %c0 to %c1024 step %c1 iter_args(...)
SCF_FOR_RE = re.compile(r"^\s*(%[\w$-]+)\s*=\s*(%[\w$-]+)\s+to\s+(%[\w$-]+)\s+step\s+(%[\w$-]+)")

# memref.reinterpret_cast %arg2 to offset: [%19], sizes: [1], strides: [1]
REINTERPRET_SIZES_RE = re.compile(r"sizes:\s*\[([^\]]*)\]")

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "tf32": 4, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
                 "i1": 1, "index": 8, "f8E4M3FN": 1, "f8E5M2": 1, "ui8": 1, "si8": 1}


@dataclass(frozen=True)
class ShapedType:
    kind: str                 # "tensor" | "memref"
    shape: tuple[int | None, ...]
    element: str

    @property
    def static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def numel(self) -> int | None:
        return math.prod(self.shape) if self.static else None

    @property
    def element_bytes(self) -> int:
        if self.element.startswith("!tt.ptr"):
            return 8
        return ELEMENT_BYTES.get(self.element, 4)

    @property
    def bytes(self) -> int | None:
        n = self.numel
        return None if n is None else n * self.element_bytes

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"{self.kind}<{dims}{self.element}>"


def _shaped(kind: str, dims: str, element: str) -> ShapedType:
    shape = tuple(None if d == "?" else int(d) for d in dims.split("x") if d)
    return ShapedType(kind, shape, element)


def tensor_types(text: str) -> list[ShapedType]:
    """Every ``tensor<...>`` type in ``text``, in order."""
    return [_shaped("tensor", m.group(1), m.group(2)) for m in TENSOR_TYPE_RE.finditer(text)]


def memref_types(text: str) -> list[ShapedType]:
    """Every ``memref<...>`` type in ``text``, in order."""
    return [_shaped("memref", m.group(1), m.group(2)) for m in MEMREF_TYPE_RE.finditer(text)]


@dataclass
class Op:
    """One operation line (region ops also carry the text of their closing line)."""

    index: int
    line_no: int                  # 1-based line in the IR text
    text: str                     # the op line, stripped
    name: str                     # e.g. "scf.for", "tt.load", "return"
    results: list[str]
    parent: int | None            # index of the enclosing region op
    depth: int
    loc_ref: str | None = None    # "#loc8" or an inline location body
    close_text: str | None = None  # "} {ExtractedLoadOrStore} loc(#loc3)" for region ops
    end_line_no: int | None = None

    @property
    def full_text(self) -> str:
        return self.text + (" " + self.close_text if self.close_text else "")

    @property
    def attrs(self) -> set[str]:
        """Names of the attributes written in ``{...}`` on the op line or its closing line (unit
        attributes such as ``DiscreteMemAccess`` and keys such as ``hivm.unlikely_condition``)."""
        out: set[str] = set()
        texts = [strip_strings(self.text)]
        if self.close_text:
            texts.append(strip_strings(self.close_text))
        for t in texts:
            for m in ATTR_DICT_RE.finditer(t):
                for part in m.group(1).split(","):
                    key = part.split("=")[0].strip()
                    if key and re.fullmatch(r"[\w.$]+", key):
                        out.add(key)
        return out

    def tensor_types(self) -> list[ShapedType]:
        return tensor_types(self.text)

    def memref_types(self) -> list[ShapedType]:
        return memref_types(self.text)


@dataclass
class IRModule:
    """A parsed TTIR or adapter-IR file."""

    text: str
    stage: str
    ops: list[Op] = field(default_factory=list)
    loc_defs: dict[str, str] = field(default_factory=dict)

    # -- queries --------------------------------------------------------------------------------
    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @cached_property
    def function_name(self) -> str | None:
        m = FUNC_NAME_RE.search(self.text)
        return m.group(1) if m else None

    @cached_property
    def mix_mode(self) -> str | None:
        m = MIX_MODE_RE.search(self.text)
        return m.group(1) if m else None

    @cached_property
    def parallel_mode(self) -> str | None:
        m = PARALLEL_MODE_RE.search(self.text)
        return m.group(1) if m else None

    @cached_property
    def constants(self) -> dict[str, int]:
        """SSA name -> integer value of ``arith.constant`` scalars (for loop trip counts)."""
        out = {}
        for op in self.ops:
            if op.name == "arith.constant" and op.results:
                m = CONST_INT_RE.match(op.text.split("=", 1)[1])
                if m:
                    out[op.results[0]] = int(m.group(1))
        return out

    def find(self, *names: str) -> list[Op]:
        return [op for op in self.ops if op.name in names]

    def parent_of(self, op: Op) -> Op | None:
        return self.ops[op.parent] if op.parent is not None else None

    def ancestors(self, op: Op) -> list[Op]:
        out = []
        cur = self.parent_of(op)
        while cur is not None:
            out.append(cur)
            cur = self.parent_of(cur)
        return out

    def enclosing_loops(self, op: Op) -> list[Op]:
        return [a for a in self.ancestors(op) if a.name in ("scf.for", "scf.while", "affine.for")]

    def descendants(self, op: Op) -> list[Op]:
        if op.end_line_no is None:
            return []
        return [o for o in self.ops[op.index + 1:] if o.line_no < op.end_line_no
                and any(a.index == op.index for a in self.ancestors(o))]

    def trip_count(self, loop: Op) -> int | None:
        """Static trip count of an ``scf.for`` whose bounds are constants, else None."""
        rest = loop.text.split("scf.for", 1)[-1]
        m = SCF_FOR_RE.match(rest)
        if not m:
            return None
        lo, hi, st = (self.constants.get(m.group(i)) for i in (2, 3, 4))
        if lo is None or hi is None or not st:
            return None
        return max(0, -(-(hi - lo) // st))

    # -- locations ------------------------------------------------------------------------------
    def resolve_all(self, ref: str | None) -> list[SourceLoc]:
        """Every file location a location reference stands for, innermost first: for
        ``callsite(callee at caller)`` the callee's then the caller's, for ``fused[...]`` each part."""
        return loc_frames(ref, self.loc_defs)

    def resolve_loc(self, ref: str | None, source_file: str | None = None) -> SourceLoc | None:
        """Resolve ``#locN`` / an inline location body to one file location (None for unknown).

        With ``source_file``, the first location in that file (so a ``callsite`` into Triton's
        standard library maps to the task line that called it); without it, the first location
        outside the installed ``triton`` package, else the innermost one."""
        locs = self.resolve_all(ref)
        if not locs:
            return None
        if source_file:
            return next((loc for loc in locs if _same_file(loc.file, source_file)), None)
        return next((loc for loc in locs if "/triton/" not in loc.file), locs[0])

    def source_of(self, op: Op, source_file: str | None = None) -> SourceLoc | None:
        """The source location of ``op``; for ops with an unknown location, the nearest ancestor's."""
        got = self.resolve_loc(op.loc_ref, source_file)
        if got is not None:
            return got
        for anc in self.ancestors(op):
            if anc.name in ("module", "func.func", "tt.func"):
                break
            got = self.resolve_loc(anc.loc_ref, source_file)
            if got is not None:
                return got
        return None

    def source_line(self, op: Op, source_file: str | None = None) -> int | None:
        loc = self.source_of(op, source_file)
        return loc.line if loc is not None else None


def _same_file(a: str, b: str) -> bool:
    """Same file, comparing whole paths when both are absolute, else the last path components."""
    if a == b:
        return True
    if a.startswith("/") and b.startswith("/"):
        return os.path.realpath(a) == os.path.realpath(b)
    return a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def parse_ir(text: str, stage: str = "ttadapter") -> IRModule:
    """Parse TTIR or adapter IR text into an :class:`IRModule`."""
    mod = IRModule(text=text, stage=stage)
    stack: list[int] = []  # indices of open region ops
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        m = LOC_DEF_RE.match(line)
        if m:
            mod.loc_defs[m.group("name")] = m.group("body")
            continue
        if line.startswith("#"):       # #map = affine_map<...> and other aliases
            continue
        delta = brace_delta(line)
        if line.startswith("}"):
            # closing line: "}", "} loc(#loc)", "} {attrs} loc(..)", "} else {", "} -> type loc(..)"
            if stack:
                opened = mod.ops[stack[-1]]
                opened.close_text = ((opened.close_text + " ") if opened.close_text else "") + line
                if opened.loc_ref is None:
                    opened.loc_ref = trailing_loc(line)
                if delta < 0:
                    opened.end_line_no = i
                    stack.pop()
            continue
        if line.startswith("^"):       # block label ^bb0(...):
            continue
        head = op_head(line)
        if head is None:
            continue
        op = Op(index=len(mod.ops), line_no=i, text=line, name=head.name, results=head.results,
                parent=stack[-1] if stack else None, depth=len(stack), loc_ref=trailing_loc(line))
        mod.ops.append(op)
        if delta > 0:
            stack.append(op.index)
    return mod


def parse_ttir(text: str) -> IRModule:
    return parse_ir(text, "ttir")


def parse_adapter_ir(text: str) -> IRModule:
    return parse_ir(text, "ttadapter")
