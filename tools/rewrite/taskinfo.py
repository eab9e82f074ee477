"""What a rewrite may learn about a task statically (ast only: task code never runs here).

Module constants (``DYNAMIC``, shapes, ``EPS`` ...), the reference and launcher functions, and the
names of the dtypes a task runs.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from functools import lru_cache

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.LShift: operator.lshift, ast.Pow: operator.pow, ast.Div: operator.truediv, ast.Mod: operator.mod}


def safe_eval(node: ast.expr, names: dict[str, object] | None = None):
    """Evaluate a literal-ish expression: numbers, tuples/lists, + - * // << ** on them, known names.

    Raises ValueError on anything else.
    """
    names = names or {}
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)) or \
            isinstance(node, ast.Constant) and node.value is None:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [safe_eval(e, names) for e in node.elts]
        return tuple(vals) if isinstance(node, ast.Tuple) else vals
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -safe_eval(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = safe_eval(node.left, names), safe_eval(node.right, names)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and right > 64:
            raise ValueError("exponent too large")
        if isinstance(node.op, ast.LShift) and isinstance(right, int) and right > 64:
            raise ValueError("shift too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return f"torch.{node.attr}"
    raise ValueError(f"not a literal: {ast.unparse(node)}")


@dataclass
class TaskInfo:
    tree: ast.Module
    constants: dict[str, object] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)

    @property
    def dynamic(self) -> bool:
        return bool(self.constants.get("DYNAMIC", False))

    @property
    def dtypes(self) -> list[str]:
        return [str(d).replace("torch.", "") for d in self.constants.get("DTYPES", []) or []]

    def shapes(self, which: str = "BENCH_SHAPES") -> list[tuple]:
        out = []
        for s in self.constants.get(which, []) or []:
            out.append(tuple(s) if isinstance(s, (tuple, list)) else (s,))
        return out

    @property
    def reference(self) -> ast.FunctionDef | None:
        return self.functions.get("reference")

    @property
    def launch(self) -> ast.FunctionDef | None:
        return self.functions.get("launch")

    def launch_params(self) -> list[str] | None:
        """Positional parameter names of launch(); None when it takes *args/**kwargs or defaults."""
        fn = self.launch
        if fn is None or fn.args.vararg or fn.args.kwarg or fn.args.defaults or fn.args.kwonlyargs:
            return None
        return [a.arg for a in fn.args.args]

    def reference_source(self) -> str:
        return ast.unparse(self.reference) if self.reference else ""


@lru_cache(maxsize=256)
def task_info(source: str) -> TaskInfo:
    tree = ast.parse(source)
    info = TaskInfo(tree=tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            info.functions[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                info.constants[node.targets[0].id] = safe_eval(node.value, info.constants)
            except (ValueError, TypeError, ZeroDivisionError, OverflowError):
                pass
    return info


def numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
