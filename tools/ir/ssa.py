"""A def-use view of one Triton MLIR function (TTIR or TTGIR) for the dataflow detectors.

The view is deliberately small: every op line (read with ``mlir.op_head``) becomes an :class:`Op` (results,
op name, operands, enclosing loops, source line); layouts are read from the ``#name = #ttg....`` definitions
(``layouts``). On top of it sit the analyses the detectors share:

- :meth:`Func.origins` -- which function arguments and ``tt.get_program_id`` axes a value depends on
  (forward closure through every op, loop-carried values included);
- :meth:`Func.loads` -- every global read (``tt.load``, ``ttg.async_copy_global_to_local``,
  ``ttng.async_tma_copy_global_to_local``, ``tt.descriptor_load``) with its address/mask operands;
- ``strides.strides(func, value)`` -- how an address tensor varies along each dimension.

It is a best-effort reading of printed IR, not an MLIR parser: ops it does not know propagate
dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from tritondx.tools.ir.layouts import TENSOR_TYPE_RE, Layout, TensorType, layout_of, parse_layouts, parse_tensor_type
from tritondx.tools.ir.mlir import op_head, split_top
from tritondx.tools.ir.parse import IRLine, IRModule, parse_mlir

# ---------------------------------------------------------------------------------------------
# Line shapes
# ---------------------------------------------------------------------------------------------

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
# Integer constants:  %c128_i32 = arith.constant 128 : i32     %cst = arith.constant dense<4> : tensor<...>
CONST_INT_RE = re.compile(r'arith\.constant\s+(?:dense<)?(?P<v>-?\d+)>?\s*:\s*(?:tensor<[^>]*x)?i\d+')
# Descriptor access with its coordinates:  ttng.async_tma_copy_global_to_local %a_desc[%a, %c0_i32] %buf, ...
#                                          %x = tt.descriptor_load %a_desc[%m, %k] : !tt.tensordesc<...> -> tensor<...>
DESC_COORDS_RE = re.compile(r'%[\w$.\-]+\[[^\]]*\]')
# Program id axis:  %pid = tt.get_program_id x : i32
PROGRAM_ID_RE = re.compile(r'tt\.get_program_id\s+(?P<axis>[xyz])')


LOAD_OPS = ("tt.load", "ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "tt.descriptor_load",
            "ttng.async_tma_gather")
STORE_OPS = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_store", "ttng.async_tma_copy_local_to_global")
LOOP_OPS = ("scf.for", "scf.while")


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
                for i, a in enumerate(split_top(_func_header_args(t))):
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
            for a in split_top(bm.group("args")):
                am = re.match(r"%([\w$.\-]+)", a)
                if am:
                    fresh(am.group(1))
            continue
        head = op_head(t) if not t.startswith("}") else None
        if head is None or len(head.results) > 1 or "." not in head.name:
            # a comma list of results (``%a, %b = tt.split``) is not read: its results stay undefined
            if head is None and t.startswith("}") and t.endswith("{"):  # } else {
                # the else region of an scf.if: marked, so ops of its two arms tell each other apart
                stack.append((f"{popped[0]}:else", popped[1]) if popped[0] == "scf.if" else popped)
                scopes.append({})
            continue
        result_names = [r[1:] for r in head.results]
        opname, rest = head.name, head.rest
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
