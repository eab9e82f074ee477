"""A def-use view of one Triton MLIR function (TTIR or TTGIR) for the dataflow detectors.

The view is deliberately small: every op line becomes an :class:`Op` (results, op name, operands,
enclosing loops, source line); layouts are read from the ``#name = #ttg....`` definitions. On top of
it sit three analyses the detectors share:

- :meth:`Func.origins` -- which function arguments and ``tt.get_program_id`` axes a value depends on
  (forward closure through every op, loop-carried values included);
- :meth:`Func.strides` -- how an address tensor varies along each dimension (``const``, ``unit``,
  ``scaled``, ``gather``, ``irregular``), from ``make_range``/``splat``/``expand_dims``/``broadcast``/
  ``addi``/``muli``/``addptr`` chains; this is a syntactic re-derivation of what the axis analysis
  should see, used to tell when the layout the compiler chose disagrees with the access pattern;
- :meth:`Func.loads` -- every global read (``tt.load``, ``ttg.async_copy_global_to_local``,
  ``ttng.async_tma_copy_global_to_local``, ``tt.descriptor_load``) with its address/mask operands.

It is a best-effort reading of printed IR, not an MLIR parser: ops it does not know propagate
dependencies but give ``unknown`` strides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from tritondx.tools.ir.parse import IRLine, IRModule, parse_mlir

# ---------------------------------------------------------------------------------------------
# Line shapes
# ---------------------------------------------------------------------------------------------

# Op with results (single, multi-result group, or generic quoted form):
#   %x_5 = tt.load %x_4, %mask_3 : tensor<128x!tt.ptr<f32>, #blocked> loc(#loc27)
#   %acc_57:7 = scf.for %acc_59 = %c0_i32 to %K step %c32_i32 iter_args(%arg10 = %cst, ...) -> (...) : i32 {
#   %1 = "tt.reduce"(%acc) <{axis = 0 : i32}> ({
RESULT_OP_RE = re.compile(r'^(?P<res>%[\w$.\-]+)(?::(?P<n>\d+))?\s*=\s*"?(?P<op>[a-z_][\w]*(?:\.[\w]+)+)"?')
# Op without results:
#   tt.store %1, %4, %mask_3 : tensor<128x!tt.ptr<f32>, #blocked> loc(#loc14)
#   ttng.async_tma_copy_global_to_local %a_desc[%a, %c0_i32] %a_14, %acc_10, %acc_13 : ... loc(#loc30)
NORESULT_OP_RE = re.compile(r'^"?(?P<op>[a-z_][\w]*(?:\.[\w]+)+)"?(?=[\s(]|$)')
# SSA value reference (a multi-result element is %name#i):
#   %acc_57#0      %c-1_i32      %arg10
VALUE_RE = re.compile(r'%(?P<name>[\w$.\-]+)(?:#\d+)?')
# Trailing location of an op:  ... loc(#loc27)   ... loc(callsite(#loc1 at #loc15))
TRAILING_LOC_RE = re.compile(r'\s+loc\(.*\)\s*$')
# Function header with its arguments and their attributes:
#   tt.func public @axpy_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %n: i32 ...) ... {
FUNC_RE = re.compile(r'^tt\.func\s+(?:public\s+|private\s+)?@(?P<name>[\w$.]+)\((?P<args>.*)\)\s*(?:->.*?)?(?:attributes\s*\{.*\})?\s*\{?\s*$')
# One argument:  %x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc))
FUNC_ARG_RE = re.compile(r'^%(?P<name>[\w$.\-]+)\s*:\s*(?P<type>.+?)(?:\s*\{(?P<attrs>[^{}]*)\})?(?:\s+loc\(.*\))?$')
# Divisibility the JIT attached to an argument:  {tt.divisibility = 16 : i32}
DIVISIBILITY_RE = re.compile(r'tt\.divisibility\s*=\s*(\d+)')
# scf.for induction variable and bounds:
#   %acc = scf.for %acc_3 = %c0_i32 to %N step %c256_i32 iter_args(%arg5 = %cst) -> (tensor<...>)  : i32 {
SCF_FOR_HEAD_RE = re.compile(r'\bscf\.for\s+%(?P<iv>[\w$.\-]+)\s*=\s*(?P<lb>%[\w$.\-]+)\s+to\s+(?P<ub>%[\w$.\-]+)\s+step\s+(?P<step>%[\w$.\-]+)')
# One iter_args binding:  %arg5 = %cst
ITER_ARG_RE = re.compile(r'%(?P<arg>[\w$.\-]+)\s*=\s*%(?P<init>[\w$.\-]+)(?:#\d+)?')
# Block arguments of a region:  ^bb0(%arg4: f32 loc(callsite(#loc1 at #loc15)), %arg5: f32 loc(...)):
BLOCK_ARGS_RE = re.compile(r'^\^bb\d+\((?P<args>.*)\):\s*$')
# Tensor type:  tensor<64x64x!tt.ptr<f32>, #blocked1>   tensor<64xf32, #ttg.slice<{dim = 1, parent = #blocked}>>
TENSOR_TYPE_RE = re.compile(r'tensor<(?P<shape>(?:\d+x)*)(?P<elem>!tt\.ptr<[^>]+>|[a-z]+\d*)(?:,\s*(?P<enc>#[\w.]+(?:<\{[^}]*\}>)?))?>')
# Memory descriptor type:  !ttg.memdesc<2x64x32xf32, #shared, #smem, mutable>
MEMDESC_TYPE_RE = re.compile(r'memdesc<(?P<shape>(?:\d+x)+)(?P<elem>[a-z]+\d*),\s*(?P<enc>#[\w.]+(?:<\{[^}]*\}>)?)')
# Integer constants:  %c128_i32 = arith.constant 128 : i32     %cst = arith.constant dense<4> : tensor<...>
CONST_INT_RE = re.compile(r'arith\.constant\s+(?:dense<)?(?P<v>-?\d+)>?\s*:\s*(?:tensor<[^>]*x)?i\d+')
# expand_dims axis:  tt.expand_dims %rm_5 {axis = 1 : i32}
AXIS_RE = re.compile(r'axis\s*=\s*(\d+)')
# tt.trans order:  tt.trans %y_26 {order = array<i32: 1, 0>}
TRANS_ORDER_RE = re.compile(r'order\s*=\s*array<i32:\s*([\d,\s]+)>')
# Descriptor access with its coordinates:  ttng.async_tma_copy_global_to_local %a_desc[%a, %c0_i32] %buf, ...
#                                          %x = tt.descriptor_load %a_desc[%m, %k] : !tt.tensordesc<...> -> tensor<...>
DESC_COORDS_RE = re.compile(r'%[\w$.\-]+\[[^\]]*\]')
# Program id axis:  %pid = tt.get_program_id x : i32
PROGRAM_ID_RE = re.compile(r'tt\.get_program_id\s+(?P<axis>[xyz])')

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

LOAD_OPS = ("tt.load", "ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "tt.descriptor_load",
            "ttng.async_tma_gather")
STORE_OPS = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_store", "ttng.async_tma_copy_local_to_global")
LOOP_OPS = ("scf.for", "scf.while")
# ops whose result strides equal their (first) operand's
PASS_THROUGH_OPS = ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui",
                    "tt.bitcast", "ttg.convert_layout", "tt.int_to_ptr", "tt.ptr_to_int", "arith.bitcast")


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


@dataclass
class Arg:
    name: str
    index: int
    type: str
    attrs: str

    @property
    def divisibility(self) -> int | None:
        m = DIVISIBILITY_RE.search(self.attrs or "")
        return int(m.group(1)) if m else None

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("!tt.ptr")

    @property
    def is_int(self) -> bool:
        return bool(re.fullmatch(r"i\d+", self.type.strip()))


@dataclass
class Op:
    idx: int                      # position in Func.ops
    line: IRLine
    name: str                     # tt.load, scf.for, arith.addi ...
    results: list[str]
    operands: list[str]
    loops: tuple[int, ...] = ()   # Func.ops indices of the enclosing scf.for / scf.while (outer first)
    regions: tuple[int, ...] = () # Func.ops indices of every enclosing region op (outer first)
    else_arms: tuple[int, ...] = () # of those, the scf.if ops whose else region holds this op
    defines: list[str] = field(default_factory=list)  # values the op's header binds (induction var, iter args)

    @property
    def text(self) -> str:
        return self.line.text

    @property
    def body(self) -> str:
        """The op text without its trailing location."""
        return TRAILING_LOC_RE.sub("", self.line.text)

    @cached_property
    def result_type(self) -> TensorType | None:
        body = self.body
        for sep in (" -> ", " to "):
            if sep in body:
                t = parse_tensor_type(body.rsplit(sep, 1)[1])
                if t:
                    return t
        if " : " in body:
            return parse_tensor_type(body.rsplit(" : ", 1)[1])
        return None

    @cached_property
    def operand_types(self) -> list[TensorType]:
        body = self.body
        if " : " not in body:
            return []
        return [t for t in (parse_tensor_type(m.group(0)) for m in TENSOR_TYPE_RE.finditer(body.split(" : ", 1)[1]))
                if t]

    @property
    def src_line(self) -> int | None:
        return self.line.src_line


@dataclass
class Stride:
    """How an index/address tensor varies along one dimension."""

    kind: str                     # const | unit | scaled | gather | irregular | unknown
    factor: int | None = None     # for scaled: the known element stride (None when a runtime value)
    by: str | None = None         # for scaled: the SSA value it is scaled by, if not a constant
    wraps: bool = False           # unit stride through a modulo (contiguous, but not provably)


CONST = Stride("const")


def _combine_add(a: Stride, b: Stride) -> Stride:
    """Stride of a sum: strides add (i*s + i has stride s+1; a known part and a runtime part stay runtime)."""
    if a.kind == "const":
        return b
    if b.kind == "const":
        return a
    for k in ("gather", "unknown", "irregular"):
        if k in (a.kind, b.kind):
            return Stride(k)
    fa = 1 if a.kind == "unit" else a.factor
    fb = 1 if b.kind == "unit" else b.factor
    if fa is not None and fb is not None:
        return Stride("scaled", fa + fb) if fa + fb != 1 else Stride("unit")
    return Stride("scaled", None, a.by or b.by)


@dataclass
class Func:
    name: str
    args: dict[str, Arg]
    ops: list[Op]
    layouts: dict[str, Layout]
    defs: dict[str, Op]
    consts: dict[str, int]
    iter_init: dict[str, str]
    iter_loop: dict[str, int]
    yields: dict[int, list[str]]   # region op index -> operands of the scf.yield ops directly inside it
    pid_values: dict[str, str]     # value -> axis

    # --- dependencies ---------------------------------------------------------------------------

    @cached_property
    def _origins(self) -> dict[str, frozenset[str]]:
        """value -> the set of roots it depends on: ``arg:<name>``, ``pid:<axis>``."""
        org: dict[str, set[str]] = {a: {f"arg:{a}"} for a in self.args}
        for v, axis in self.pid_values.items():
            org[v] = {f"pid:{axis}"}
        for _ in range(6):
            changed = False
            for op in self.ops:
                deps: set[str] = set()
                for o in op.operands:
                    deps |= org.get(o, set())
                if op.name in LOOP_OPS or op.idx in self.yields:
                    for y in self.yields.get(op.idx, []):
                        deps |= org.get(y, set())
                targets = list(op.results)
                if op.name == "scf.for":
                    # the induction variable depends on the bounds; each iter arg on its init and yield
                    if op.defines and SCF_FOR_HEAD_RE.search(op.text):
                        bounds = set()
                        for b in op.operands[:3]:
                            bounds |= org.get(b, set())
                        cur = org.setdefault(op.defines[0], set())
                        if not bounds <= cur:
                            cur |= bounds
                            changed = True
                    ys = self.yields.get(op.idx, [])
                    for i, it in enumerate(a for a, lp in self.iter_loop.items() if lp == op.idx):
                        d = set(org.get(self.iter_init.get(it, ""), set()))
                        if i < len(ys):
                            d |= org.get(ys[i], set())
                        cur = org.setdefault(it, set())
                        if not d <= cur:
                            cur |= d
                            changed = True
                if op.name in self.PROGRAM_ID_OPS:
                    continue
                for r in targets:
                    cur = org.setdefault(r, set())
                    if not deps <= cur:
                        cur |= deps
                        changed = True
            if not changed:
                break
        return {k: frozenset(v) for k, v in org.items()}

    PROGRAM_ID_OPS = ("tt.get_program_id",)

    def origins(self, value: str) -> frozenset[str]:
        return self._origins.get(value, frozenset())

    def arg_origins(self, value: str) -> set[str]:
        return {o[4:] for o in self.origins(value) if o.startswith("arg:")}

    def pid_axes(self, value: str) -> set[str]:
        return {o[4:] for o in self.origins(value) if o.startswith("pid:")}

    # --- memory ops -----------------------------------------------------------------------------

    def loads(self) -> list[Op]:
        return [op for op in self.ops if op.name in LOAD_OPS]

    def stores(self) -> list[Op]:
        return [op for op in self.ops if op.name in STORE_OPS]

    @staticmethod
    def address_operand(op: Op) -> str | None:
        if op.name in ("ttng.async_tma_copy_global_to_local", "tt.descriptor_load", "tt.descriptor_store",
                       "ttng.async_tma_gather", "ttng.async_tma_copy_local_to_global"):
            return op.operands[0] if op.operands else None  # the descriptor
        if op.name in ("tt.atomic_rmw", "tt.atomic_cas"):
            return op.operands[0] if op.operands else None
        return op.operands[0] if op.operands else None

    def address_values(self, op: Op) -> list[str]:
        """Every value the accessed address depends on: the pointer tensor, or a descriptor and its coordinates."""
        if op.name in ("ttng.async_tma_copy_global_to_local", "tt.descriptor_load", "tt.descriptor_store",
                       "ttng.async_tma_gather", "ttng.async_tma_copy_local_to_global"):
            m = DESC_COORDS_RE.search(op.body)
            if m:
                # operands are resolved keys in textual order; the bracket (descriptor + coordinates) comes first
                return op.operands[:len(VALUE_RE.findall(m.group(0)))]
        a = self.address_operand(op)
        return [a] if a else []

    @staticmethod
    def mask_operand(op: Op) -> str | None:
        body = op.body
        if op.name == "ttg.async_copy_global_to_local":
            m = re.search(r"\bmask\s+%([\w$.\-]+)", body)
            return m.group(1) if m else None
        if op.name == "tt.load":
            return op.operands[1] if len(op.operands) > 1 else None
        if op.name == "tt.store":
            return op.operands[2] if len(op.operands) > 2 else None
        return None

    def pointer_type(self, op: Op) -> TensorType | None:
        """The tensor-of-pointers type a load/store addresses (None for scalar and descriptor accesses)."""
        for t in op.operand_types:
            if t.is_ptr:
                return t
        return None

    def layout(self, t: TensorType | None) -> Layout | None:
        return layout_of(t.enc, self.layouts) if t else None

    # --- loops ----------------------------------------------------------------------------------

    def loop_ops(self) -> list[Op]:
        return [op for op in self.ops if op.name in LOOP_OPS]

    def innermost_loop(self, op: Op) -> int | None:
        return op.loops[-1] if op.loops else None

    # --- strides --------------------------------------------------------------------------------

    def strides(self, value: str) -> tuple[Stride, ...]:
        """Per-dimension variation of an index or pointer tensor (see the module docstring)."""
        memo: dict[str, tuple[Stride, ...]] = {}
        return self._strides(value, memo, 0)

    def _rank(self, value: str) -> int:
        op = self.defs.get(value)
        t = op.result_type if op else None
        return len(t.shape) if t else 0

    def _strides(self, value: str, memo: dict, depth: int) -> tuple[Stride, ...]:
        if value in memo:
            return memo[value]
        memo[value] = tuple(Stride("unknown") for _ in range(max(self._rank(value), 1)))
        res = self._strides_uncached(value, memo, depth)
        memo[value] = res
        return res

    def _strides_uncached(self, value: str, memo: dict, depth: int) -> tuple[Stride, ...]:
        if depth > 200:
            return (Stride("unknown"),)
        if value in self.args:
            return ()
        if value in self.iter_init:
            return self._strides(self.iter_init[value], memo, depth + 1)
        op = self.defs.get(value)
        if op is None:
            return ()  # induction variables, block arguments: scalars
        rank = len(op.result_type.shape) if op.result_type else 0
        name = op.name
        ops = op.operands

        def sub(v: str) -> tuple[Stride, ...]:
            s = self._strides(v, memo, depth + 1)
            if len(s) < rank:  # a scalar (or lower-rank) operand: constant along every dim
                s = tuple([CONST] * (rank - len(s))) + tuple(s)
            return s

        if rank == 0:
            return ()
        if name == "tt.make_range":
            return (Stride("unit"),)
        if name in ("arith.constant", "tt.splat", "tt.get_program_id", "tt.get_num_programs"):
            return tuple([CONST] * rank)
        if name == "tt.expand_dims" and ops:
            src = list(self._strides(ops[0], memo, depth + 1))
            m = AXIS_RE.search(op.body)
            axis = int(m.group(1)) if m else 0
            src = src + [CONST] * max(0, rank - 1 - len(src))
            src.insert(min(axis, len(src)), CONST)
            return tuple(src[:rank])
        if name == "tt.broadcast" and ops:
            return sub(ops[0])
        if name == "tt.trans" and ops:
            src = sub(ops[0])
            m = TRANS_ORDER_RE.search(op.body)
            order = [int(x) for x in m.group(1).split(",")] if m else list(range(rank))[::-1]
            return tuple(src[i] for i in order) if len(src) == len(order) else tuple(Stride("unknown") for _ in range(rank))
        if name in PASS_THROUGH_OPS and ops:
            return sub(ops[0])
        if name in ("arith.addi", "tt.addptr", "arith.subi", "arith.ori") and len(ops) >= 2:
            a, b = sub(ops[0]), sub(ops[1])
            if name == "arith.subi":
                b = tuple(s if s.kind == "const" else Stride("irregular") if s.kind == "unit" else s for s in b)
            return tuple(_combine_add(x, y) for x, y in zip(a, b))
        if name in ("arith.muli", "arith.shli") and len(ops) >= 2:
            a, b = sub(ops[0]), sub(ops[1])
            if all(s.kind == "const" for s in b):
                var, scale = a, ops[1]
            elif all(s.kind == "const" for s in a):
                var, scale = b, ops[0]
            else:
                return tuple(Stride("irregular") for _ in range(rank))
            k = self.const_value(scale)
            if name == "arith.shli" and k is not None:
                k = 1 << k
            out = []
            for s in var:
                if s.kind == "const":
                    out.append(CONST)
                elif k == 1:
                    out.append(s)
                elif s.kind in ("unit", "scaled"):
                    f = (s.factor or 1) * k if (k is not None and (s.kind == "unit" or s.factor)) else None
                    out.append(Stride("scaled", f, None if k is not None else self.scalar_name(scale)))
                else:
                    out.append(s)
            return tuple(out)
        if name in ("arith.remsi", "arith.remui") and len(ops) >= 2:
            a = sub(ops[0])
            return tuple(Stride("unit", wraps=True) if s.kind == "unit" else
                         (CONST if s.kind == "const" else Stride("irregular")) for s in a)
        if name in ("arith.divsi", "arith.divui", "arith.shrsi", "arith.shrui") and len(ops) >= 2:
            # i // d gives runs of d equal values: constant across a warp when d >= 32 or a runtime value
            # (row index of a flattened offset); a small known divisor mixes lanes: irregular
            a = sub(ops[0])
            d = self.const_value(ops[1])
            if d is not None and name in ("arith.shrsi", "arith.shrui"):
                d = 1 << d
            runs = d is None or d >= 32
            return tuple(CONST if s.kind == "const" or (runs and s.kind == "unit") else Stride("irregular") for s in a)
        if name == "arith.andi" and len(ops) >= 2:
            a = sub(ops[0])
            return tuple(CONST if s.kind == "const" else Stride("irregular") for s in a)
        if name in ("arith.select",) and len(ops) >= 3:
            a, b = sub(ops[1]), sub(ops[2])
            return tuple(x if (x.kind == y.kind and x.factor == y.factor) else _combine_add(x, y) if "const" in (x.kind, y.kind) else Stride("irregular")
                         for x, y in zip(a, b))
        if name in LOAD_OPS or name == "ttg.local_load":
            return tuple(Stride("gather") for _ in range(rank))
        return tuple(Stride("unknown") for _ in range(rank))

    def const_value(self, value: str) -> int | None:
        if value in self.consts:
            return self.consts[value]
        op = self.defs.get(value)
        if op is not None and op.name in ("tt.splat", "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast") \
                and op.operands:
            return self.const_value(op.operands[0])
        return None

    def scalar_name(self, value: str) -> str:
        """The scalar a splat tensor came from (for messages): %stride_m rather than %x_11."""
        seen = 0
        while seen < 20:
            seen += 1
            op = self.defs.get(value)
            if op is None or op.name not in ("tt.splat", "arith.extsi", "arith.extui", "tt.broadcast") or not op.operands:
                return value
            value = op.operands[0]
        return value


def _split_args(argtext: str) -> list[str]:
    parts, depth, cur, in_str = [], 0, [], False
    for ch in argtext:
        if ch == '"':
            in_str = not in_str
        if not in_str:
            if ch in "([<{":
                depth += 1
            elif ch in ")]>}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append("".join(cur).strip())
                cur = []
                continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _func_header_args(text: str) -> str:
    """The text between the parentheses of ``tt.func ... @name( ... )``, with nesting respected."""
    start = text.index("(", text.index("@"))
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    return text[start + 1:]


def build_funcs(text: str, module: IRModule | None = None) -> list[Func]:
    """Every ``tt.func`` in a TTIR/TTGIR text (or one pass dump).

    MLIR's printer reuses value names in sibling regions (two loops may both define ``%cols_11``), so
    names are resolved through a scope stack and every definition gets a unique key (``cols_11``,
    ``cols_11@2`` ...); :func:`display` turns a key back into the printed name.
    """
    module = module or parse_mlir(text, "ttgir")
    layouts = parse_layouts(text)
    funcs: list[Func] = []
    cur: Func | None = None
    stack: list[tuple[str, int | None]] = []  # (kind, op index or None)
    scopes: list[dict[str, str]] = []
    used: dict[str, int] = {}

    def fresh(name: str) -> str:
        n = used.get(name, 0) + 1
        used[name] = n
        key = name if n == 1 else f"{name}@{n}"
        scopes[-1][name] = key
        return key

    def resolve(name: str) -> str:
        for sc in reversed(scopes):
            if name in sc:
                return sc[name]
        return name

    for line in module.lines:
        t = line.text
        if not t:
            continue
        popped: tuple[str, int | None] = ("region", None)
        if t.startswith("}") and stack:
            popped = stack.pop()
            if cur is not None and len(scopes) > 1:
                scopes.pop()
            if popped[0] == "tt.func" and cur is not None:
                funcs.append(cur)
                cur = None
        if t.startswith("tt.func"):
            m = FUNC_RE.match(t)
            if m:
                args = {}
                scopes, used = [{}], {}
                for i, a in enumerate(_split_args(_func_header_args(t))):
                    am = FUNC_ARG_RE.match(a)
                    if am:
                        key = fresh(am.group("name"))
                        args[key] = Arg(key, i, am.group("type").strip(), am.group("attrs") or "")
                cur = Func(m.group("name"), args, [], layouts, {}, {}, {}, {}, {}, {})
            if t.endswith("{"):
                stack.append(("tt.func", None))
                scopes.append({})
            continue
        if cur is None:
            if t.endswith("{") and not t.startswith("}"):
                stack.append(("module", None))
            elif t.startswith("}") and t.endswith("{"):
                stack.append(("region", None))
            continue
        bm = BLOCK_ARGS_RE.match(t)
        if bm:
            for a in _split_args(bm.group("args")):
                am = re.match(r"%([\w$.\-]+)", a)
                if am:
                    fresh(am.group(1))
            continue
        m = RESULT_OP_RE.match(t)
        if m:
            result_names = [m.group("res")[1:]]
            opname = m.group("op")
            rest = t[m.end():]
        else:
            m2 = NORESULT_OP_RE.match(t) if not t.startswith("}") else None
            if not m2:
                if t.startswith("}") and t.endswith("{"):  # } else {
                    # the else region of an scf.if: marked, so ops of its two arms tell each other apart
                    stack.append((f"{popped[0]}:else", popped[1]) if popped[0] == "scf.if" else popped)
                    scopes.append({})
                continue
            result_names = []
            opname = m2.group("op")
            rest = t[m2.end():]
        body = TRAILING_LOC_RE.sub("", rest)
        region_ops = tuple(i for k, i in stack if i is not None)
        loops = tuple(i for k, i in stack if k in LOOP_OPS and i is not None)
        op = Op(len(cur.ops), line, opname, [], [], loops, region_ops,
                tuple(i for k, i in stack if i is not None and k == "scf.if:else"))
        inner_defs: list[str] = []   # names the op binds inside its own region
        if opname == "scf.for":
            hm = SCF_FOR_HEAD_RE.search(TRAILING_LOC_RE.sub("", t))
            operands = [resolve(hm.group(g)[1:]) for g in ("lb", "ub", "step")] if hm else []
            if hm:
                inner_defs.append(hm.group("iv"))
            ia = body.find("iter_args(")
            pairs = []
            if ia >= 0:
                depth, j = 0, ia + len("iter_args")
                for j in range(ia + len("iter_args"), len(body)):
                    if body[j] == "(":
                        depth += 1
                    elif body[j] == ")":
                        depth -= 1
                        if depth == 0:
                            break
                for im in ITER_ARG_RE.finditer(body[ia + len("iter_args("):j]):
                    init = resolve(im.group("init"))
                    pairs.append((im.group("arg"), init))
                    operands.append(init)
        else:
            operands = [resolve(v.group("name")) for v in VALUE_RE.finditer(body)]
            pairs = []
        op.operands = operands
        op.results = [fresh(r) for r in result_names]
        cur.ops.append(op)
        for r in op.results:
            cur.defs[r] = op
        if t.endswith("{"):
            stack.append((opname, op.idx))
            scopes.append({})
            defines = [fresh(n) for n in inner_defs]
            for arg, init in pairs:
                key = fresh(arg)
                cur.iter_init[key] = init
                cur.iter_loop[key] = op.idx
                defines.append(key)
            op.defines = defines
        cm = CONST_INT_RE.search(t) if opname == "arith.constant" else None
        if cm and op.results:
            cur.consts[op.results[0]] = int(cm.group("v"))
        pm = PROGRAM_ID_RE.search(t) if opname == "tt.get_program_id" else None
        if pm and op.results:
            cur.pid_values[op.results[0]] = pm.group("axis")
        if opname == "scf.yield" and region_ops:
            cur.yields.setdefault(region_ops[-1], []).extend(op.operands)
    if cur is not None:
        funcs.append(cur)
    return funcs


def display(key: str | None) -> str:
    """The printed name of a value key (``cols_11@2`` -> ``%cols_11``)."""
    return "%" + key.split("@")[0] if key else "?"


def kernel_func(text: str, module: IRModule | None = None, name: str | None = None) -> Func | None:
    """The public kernel function of a module (the first ``tt.func``, or the one called ``name``)."""
    funcs = build_funcs(text, module)
    if name:
        for f in funcs:
            if f.name == name:
                return f
    return funcs[0] if funcs else None
