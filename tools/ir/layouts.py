"""TTGIR layouts and tensor types, read from the printed text: the ``#name = #ttg....`` definitions at the top
of a module (or inline in a type), and ``tensor<...>`` types with their element and encoding."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Tensor type:  tensor<64x64x!tt.ptr<f32>, #blocked1>   tensor<64xf32, #ttg.slice<{dim = 1, parent = #blocked}>>
TENSOR_TYPE_RE = re.compile(r'tensor<(?P<shape>(?:\d+x)*)(?P<elem>!tt\.ptr<[^>]+>|[a-z]+\d*)(?:,\s*(?P<enc>#[\w.]+(?:<\{[^}]*\}>)?))?>')

# Layout definitions at the top of TTGIR:
#   #blocked1 = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
#   #shared = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}>
#   #shared1 = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#   #mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 64, 16]}>
LAYOUT_DEF_RE = re.compile(r'^(?P<name>#[\w]+)\s*=\s*#(?P<kind>ttg\.[\w]+|ttng\.[\w]+)<\{(?P<body>.*)\}>\s*$', re.MULTILINE)
# One field of a layout body:  sizePerThread = [1, 4]     maxPhase = 1
LAYOUT_FIELD_RE = re.compile(r'(?P<key>\w+)\s*=\s*(?P<val>\[[^\]]*\]|[\w.#-]+)')
# Inline layout inside a type (pass dumps after some passes print them inline):
#   #ttg.blocked<{sizePerThread = [4, 4], threadsPerWarp = [2, 16], warpsPerCTA = [2, 2], order = [1, 0]}>
INLINE_LAYOUT_RE = re.compile(r'#(?P<kind>ttg\.[\w]+)<\{(?P<body>[^{}]*)\}>')


@dataclass(frozen=True)
class Layout:
    name: str
    kind: str                 # ttg.blocked, ttg.swizzled_shared, ttg.nvmma_shared, ttg.nvidia_mma, ...
    fields: dict

    def ints(self, key: str) -> list[int]:
        v = self.fields.get(key, "")
        return [int(x) for x in re.findall(r"-?\d+", v)] if isinstance(v, str) else []

    def num(self, key: str, default: int = 0) -> int:
        v = self.fields.get(key)
        try:
            return int(v)
        except (TypeError, ValueError):
            return default

    @property
    def order(self) -> list[int]:
        return self.ints("order")


def parse_layouts(text: str) -> dict[str, Layout]:
    out = {}
    for m in LAYOUT_DEF_RE.finditer(text):
        fields = {f.group("key"): f.group("val") for f in LAYOUT_FIELD_RE.finditer(m.group("body"))}
        out[m.group("name")] = Layout(m.group("name"), m.group("kind"), fields)
    return out


def layout_of(enc: str | None, layouts: dict[str, Layout]) -> Layout | None:
    """Resolve an encoding reference (``#blocked1``) or an inline one (``#ttg.blocked<{...}>``)."""
    if not enc:
        return None
    if enc in layouts:
        return layouts[enc]
    m = INLINE_LAYOUT_RE.search(enc)
    if m:
        fields = {f.group("key"): f.group("val") for f in LAYOUT_FIELD_RE.finditer(m.group("body"))}
        return Layout(enc, m.group("kind"), fields)
    return None


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    elem: str                 # f32, i32, !tt.ptr<f16>
    enc: str | None

    @property
    def is_ptr(self) -> bool:
        return self.elem.startswith("!tt.ptr")

    @property
    def pointee(self) -> str:
        m = re.match(r"!tt\.ptr<([a-z]+\d*)", self.elem)
        return m.group(1) if m else self.elem

    @property
    def elem_bytes(self) -> int:
        return elem_bytes(self.pointee)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def elem_bytes(ty: str) -> int:
    m = re.search(r"(\d+)$", ty)
    bits = int(m.group(1)) if m else 32
    return max(1, bits // 8)


def parse_tensor_type(text: str) -> TensorType | None:
    m = TENSOR_TYPE_RE.search(text)
    if not m:
        return None
    shape = tuple(int(x) for x in m.group("shape").split("x") if x)
    return TensorType(shape, m.group("elem"), m.group("enc"))
