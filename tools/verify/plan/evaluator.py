"""A tiny, safe evaluator of launcher arithmetic over the AST (no candidate code runs).

It answers questions such as "for these inputs, is ``N % BLOCK == 0`` true in ``launch``?" by
evaluating the launcher's own statements on the inputs' metadata: integer arithmetic (``+ - * // %
** << >>``), comparisons, ``and``/``or``/``not``, conditional expressions, tuples and subscripts,
the tensor attributes a launcher reads for sizes (``shape``, ``numel()``, ``stride()``, ``dtype``
...), and a few pure builtins (``triton.cdiv``, ``triton.next_power_of_2``, ``min``, ``max`` ...).
Anything else evaluates to :data:`UNKNOWN`; nothing is ever called that is not on the lists below,
and integers are bounded so a hostile expression cannot exhaust memory or time.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

import torch


class _Unknown:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:  # pragma: no cover - callers must test `is UNKNOWN`
        raise TypeError("UNKNOWN has no truth value")


UNKNOWN: Any = _Unknown()

#: integers beyond this magnitude are not followed (a hostile ``2 ** 10 ** 9`` stays cheap)
INT_LIMIT = 1 << 80

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
#: methods of a tensor a launcher reads for sizes; none has a side effect
_TENSOR_METHODS = {"numel", "size", "stride", "dim", "element_size", "is_contiguous", "nelement", "ndimension"}
_TENSOR_ATTRS = {"shape", "ndim", "dtype", "is_cuda"}


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


#: dotted call names -> pure function
_PURE_CALLS = {
    "len": len, "min": min, "max": max, "abs": abs, "int": int, "float": float, "bool": bool, "round": round,
    "tuple": tuple, "list": list,
    "triton.cdiv": _cdiv, "cdiv": _cdiv, "tl.cdiv": _cdiv,
    "triton.next_power_of_2": _next_power_of_2, "next_power_of_2": _next_power_of_2,
    "math.ceil": math.ceil, "math.floor": math.floor, "math.log2": math.log2, "math.sqrt": math.sqrt,
    "math.prod": math.prod, "math.gcd": math.gcd,
}
_NUMBER_TYPES = (bool, int, float)
#: the types ``isinstance`` may test against
_ISINSTANCE_TYPES = {"torch.Tensor": torch.Tensor, "int": int, "float": float, "bool": bool, "tuple": tuple,
                     "list": list, "str": str, "torch.dtype": torch.dtype}


def dotted(node: ast.AST) -> str | None:
    """``triton.cdiv`` for an Attribute chain of Names; None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _bounded(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT_LIMIT:
        return UNKNOWN
    if isinstance(v, float) and not math.isfinite(v):
        return UNKNOWN
    return v


def _safe_value(v: Any) -> bool:
    """Values the evaluator hands around: numbers, strings, dtypes, tensors (metadata only), containers."""
    if v is None or isinstance(v, (*_NUMBER_TYPES, str, torch.dtype, torch.Tensor, torch.Size, torch.device)):
        return True
    if isinstance(v, (tuple, list)):
        return all(_safe_value(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, (str, int)) and _safe_value(x) for k, x in v.items())
    return False


class Evaluator:
    """Evaluate expressions in an environment of names -> values; unsupported -> UNKNOWN.

    ``calls`` maps a plain function name to a callable ``(args, kwargs) -> value`` the owner supplies
    (e.g. a helper of the task file, itself evaluated over its AST)."""

    def __init__(self, env: dict[str, Any], calls: dict[str, Any] | None = None):
        self.env = env
        self.calls = calls or {}

    def eval(self, node: ast.AST | None) -> Any:
        if node is None:
            return UNKNOWN
        try:
            v = self._eval(node)
        except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, AttributeError, RecursionError):
            return UNKNOWN
        return _bounded(v) if v is not UNKNOWN else UNKNOWN

    def truth(self, node: ast.AST) -> bool | None:
        v = self.eval(node)
        if v is UNKNOWN or isinstance(v, torch.Tensor):
            return None
        try:
            return bool(v)
        except Exception:  # noqa: BLE001 - a value without a plain truth value
            return None

    def _eval(self, node: ast.AST) -> Any:  # noqa: C901 - one case per node type
        ev = self.eval
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (*_NUMBER_TYPES, str, type(None))) else UNKNOWN
        if isinstance(node, ast.Name):
            return self.env.get(node.id, UNKNOWN)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [ev(e) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is UNKNOWN or b is UNKNOWN or not isinstance(a, _NUMBER_TYPES) or not isinstance(b, _NUMBER_TYPES):
                if isinstance(node.op, (ast.Add, ast.Mult)) and isinstance(a, tuple) and isinstance(b, (tuple, int)):
                    return a + b if isinstance(b, tuple) else (a * b if 0 <= b <= 64 else UNKNOWN)
                return UNKNOWN
            if isinstance(node.op, ast.Pow):
                if abs(b) > 256 or (isinstance(a, int) and abs(a) > INT_LIMIT):
                    return UNKNOWN
                return a ** b
            if isinstance(node.op, (ast.LShift, ast.RShift)):
                if not isinstance(a, int) or not isinstance(b, int) or not 0 <= b <= 80:
                    return UNKNOWN
                return a << b if isinstance(node.op, ast.LShift) else a >> b
            fn = _BINOPS.get(type(node.op))
            return fn(a, b) if fn else UNKNOWN
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            if v is UNKNOWN:
                return UNKNOWN
            if isinstance(node.op, ast.Not):
                t = self.truth(node.operand)
                return UNKNOWN if t is None else (not t)
            if not isinstance(v, _NUMBER_TYPES):
                return UNKNOWN
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](v)
        if isinstance(node, ast.BoolOp):
            # short-circuit like Python; an unknown operand that matters makes the whole unknown
            is_and = isinstance(node.op, ast.And)
            for v in node.values:
                t = self.truth(v)
                if t is None:
                    return UNKNOWN
                if t != is_and:
                    return ev(v)
            return ev(node.values[-1])
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if left is UNKNOWN or right is UNKNOWN or isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
                    return UNKNOWN
                if not CMPOK(left, right):
                    return UNKNOWN
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            t = self.truth(node.test)
            return UNKNOWN if t is None else ev(node.body if t else node.orelse)
        if isinstance(node, ast.Subscript):
            base = ev(node.value)
            if base is UNKNOWN:
                return UNKNOWN
            if isinstance(node.slice, ast.Slice):
                lo, hi, st = (ev(s) if s is not None else None for s in (node.slice.lower, node.slice.upper,
                                                                         node.slice.step))
                if UNKNOWN in (lo, hi, st) or not isinstance(base, (tuple, torch.Size)):
                    return UNKNOWN
                return tuple(base[slice(lo, hi, st)])
            key = ev(node.slice)
            if key is UNKNOWN:
                return UNKNOWN
            if isinstance(base, (tuple, list, torch.Size)) and isinstance(key, int):
                return base[key]
            if isinstance(base, dict) and isinstance(key, (str, int)):
                return base.get(key, UNKNOWN)
            return UNKNOWN
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            if name:
                dt = _dtype_attr(name)
                if dt is not None:
                    return dt
            base = ev(node.value)
            if isinstance(base, torch.Tensor) and node.attr in _TENSOR_ATTRS:
                v = getattr(base, node.attr)
                return tuple(v) if isinstance(v, torch.Size) else v
            if isinstance(base, torch.Tensor) and node.attr == "T" and base.dim() == 2:
                return base.t()
            if isinstance(base, torch.dtype) and node.attr in ("itemsize", "is_floating_point"):
                return getattr(base, node.attr)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        return UNKNOWN

    def _call(self, node: ast.Call) -> Any:
        ev = self.eval
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return UNKNOWN
        args = [ev(a) for a in node.args]
        kwargs = {k.arg: ev(k.value) for k in node.keywords}
        if isinstance(node.func, ast.Attribute):
            base = ev(node.func.value)
            if isinstance(base, torch.Tensor) and node.func.attr in _TENSOR_METHODS:
                if any(a is UNKNOWN or not isinstance(a, int) for a in args) or kwargs:
                    return UNKNOWN
                v = getattr(base, node.func.attr)(*args)
                return tuple(v) if isinstance(v, torch.Size) else v
            if isinstance(base, torch.Tensor) and node.func.attr in ("contiguous", "view", "reshape", "flatten",
                                                                       "float", "half", "to", "t", "transpose"):
                return UNKNOWN if node.func.attr not in ("contiguous",) else base
        name = dotted(node.func)
        if name == "isinstance" and len(node.args) == 2 and not kwargs:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            types = [_ISINSTANCE_TYPES.get(dotted(k) or "") for k in kinds]
            if args[0] is UNKNOWN or any(t is None for t in types):
                return UNKNOWN
            return isinstance(args[0], tuple(types))
        if name in self.calls:
            return self.calls[name](args, kwargs)
        fn = _PURE_CALLS.get(name or "")
        if fn is None:
            return UNKNOWN
        if any(a is UNKNOWN for a in args) or any(v is UNKNOWN for v in kwargs.values()):
            return UNKNOWN
        if not all(_safe_value(a) for a in args) or any(isinstance(a, torch.Tensor) for a in args):
            return UNKNOWN
        if name in ("tuple", "list") and args and not isinstance(args[0], (tuple, list)):
            return UNKNOWN
        return fn(*args, **kwargs)


def CMPOK(a: Any, b: Any) -> bool:  # noqa: N802 - a predicate used like an operator table
    """Comparable without calling user code: numbers, strings, dtypes, None, tuples of those."""
    return _safe_value(a) and _safe_value(b)


def _dtype_attr(name: str) -> torch.dtype | None:
    head, _, attr = name.rpartition(".")
    if head in ("torch", "tl", "triton.language"):
        d = getattr(torch, attr, None)
        if isinstance(d, torch.dtype):
            return d
        if head != "torch":  # tl.float16 and friends
            alias = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                     "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
                     "int64": torch.int64, "uint8": torch.uint8}.get(attr)
            return alias
    return None


#: calls that make a mutable container (a module-level name bound to one is state, not a constant)
_MUTABLE_CALLS = {"list", "dict", "set", "bytearray", "defaultdict", "collections.defaultdict", "Counter",
                  "collections.Counter", "deque", "collections.deque", "OrderedDict", "collections.OrderedDict",
                  "itertools.count", "count", "SimpleNamespace", "types.SimpleNamespace", "array.array"}
_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def state_names(tree: ast.Module) -> set[str]:
    """Module-level names that may hold state across calls (issue 34): bound to a mutable container (a list,
    dict or set display or comprehension, ``list()``, ``collections.Counter()``, an instance of a class of the
    module, ...) or rebound by a function
    (``global``, ``nonlocal``). Their value at import says nothing about a later call (``_CALLS = [0]`` that
    ``launch`` increments): they are no constants, and a test that reads one is decided by the calls that ran."""
    out: set[str] = set()
    classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}   # an instance of one holds attributes
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if isinstance(value, _MUTABLE_DISPLAYS) or \
                (isinstance(value, ast.Call) and (dotted(value.func) or "") in _MUTABLE_CALLS | classes):
            for t in targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def reads_state(test: str | ast.AST, names: set[str]) -> list[str]:
    """The names of ``names`` that an expression (source text or a node) reads."""
    node = ast.parse(test, mode="eval") if isinstance(test, str) else test
    return sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in names})


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <constant expression>`` values, in order (``BLOCK = 1024``, ``HALF = BLOCK // 2``);
    never a name that may hold state across calls (:func:`state_names`)."""
    env: dict[str, Any] = {}
    ev = Evaluator(env)
    state = state_names(tree)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if stmt.targets[0].id in state:
                continue
            v = ev.eval(stmt.value)
            if v is not UNKNOWN and isinstance(v, (*_NUMBER_TYPES, str, tuple)) and _safe_value(v):
                env[stmt.targets[0].id] = v
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            if stmt.target.id in state:
                continue
            v = ev.eval(stmt.value)
            if v is not UNKNOWN and isinstance(v, (*_NUMBER_TYPES, str)):
                env[stmt.target.id] = v
    return env
