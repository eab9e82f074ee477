"""The kernel task format, checked statically (no user code runs here).

A task is one Python file holding:

- one or more ``@triton.jit`` kernels (optionally wrapped in ``triton.autotune`` / ``triton.heuristics``);
- ``launch(*inputs)``: the launcher; takes the input tensors, returns the output tensor (or a tuple);
- ``reference(*inputs)``: a PyTorch reference with the same signature and outputs;
- ``make_inputs(shape, dtype, seed, device)``: returns a tuple of input tensors for one shape;
- ``CHECK_SHAPES``: shapes checked for correctness (small enough for the CPU interpreter; at least
  one odd, i.e. not a multiple of the block size);
- ``BENCH_SHAPES``: shapes timed on a GPU (also checked there);
- ``DTYPES``: dtypes to run (``torch.float32`` ...);
- ``TOLERANCE``: ``{dtype: {"atol": ..., "rtol": ...}}`` (dtype as ``torch.float16`` or ``"float16"``).

Optional: ``NAME``, ``DESCRIPTION``, ``flops(shape, dtype)`` and ``min_bytes(shape, dtype)`` for the
roofline (default bytes: every input read once plus every output written once; default FLOPs: 0).

Executing a task (it is user code) happens only in a sandboxed worker, see ``tools/exec/sandbox.py``;
``probe_task`` (``tools/task/probe_job.py``) checks what cannot be checked without running it.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from pydantic import BaseModel

from tritondx.errors import TaskFormatError

REQUIRED_FUNCTIONS = {
    "launch": "no launcher: define `def launch(*inputs)` returning the output tensor(s)",
    "reference": "no reference: define `def reference(*inputs)` (PyTorch, same outputs as launch)",
    "make_inputs": "no input maker: define `def make_inputs(shape, dtype, seed, device)`",
}
REQUIRED_CONSTANTS = {
    "CHECK_SHAPES": "no CHECK_SHAPES: list the shapes checked for correctness",
    "BENCH_SHAPES": "no BENCH_SHAPES: list the shapes timed on a GPU",
    "DTYPES": "no DTYPES: list the dtypes to run, e.g. [torch.float32]",
    "TOLERANCE": "no TOLERANCE: give {dtype: {'atol': ..., 'rtol': ...}}",
}
MAX_TASK_BYTES = 1_000_000
# The deepest syntax tree a task may have: real kernels reach about 20; ast.unparse and compile()
# fail with RecursionError somewhere past 500, libcst (the rewrites) slows down long before.
MAX_NESTING = 100


class KernelInfo(BaseModel):
    """One ``@triton.jit`` function found in the task source."""

    name: str
    lineno: int
    end_lineno: int
    params: list[str]
    constexpr_params: list[str]
    decorators: list[str]


class TaskSpec(BaseModel):
    """What the static check learned about a task file."""

    path: str
    name: str
    source: str
    sha256: str
    kernels: list[KernelInfo]
    launch_lineno: int

    def kernel(self, name: str) -> KernelInfo | None:
        return next((k for k in self.kernels if k.name == name), None)


def _decorator_name(node: ast.expr) -> str:
    """Dotted name of a decorator, e.g. ``triton.jit`` for ``@triton.jit(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_constexpr(arg: ast.arg) -> bool:
    ann = arg.annotation
    return ann is not None and "constexpr" in ast.unparse(ann)


def find_kernels(tree: ast.Module) -> list[KernelInfo]:
    kernels = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decos = [_decorator_name(d) for d in node.decorator_list]
        if not any(d.endswith("jit") for d in decos):
            continue
        args = node.args.args
        kernels.append(
            KernelInfo(
                name=node.name,
                lineno=node.lineno,
                end_lineno=node.end_lineno or node.lineno,
                params=[a.arg for a in args],
                constexpr_params=[a.arg for a in args if _is_constexpr(a)],
                decorators=decos,
            )
        )
    return kernels


# Literal values that can never be the list CHECK_SHAPES / BENCH_SHAPES / DTYPES must be.
_NOT_A_LIST = (ast.Constant, ast.Dict, ast.Set, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.JoinedStr)


def _literal_kind(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return "None" if node.value is None else type(node.value).__name__
    return {ast.Dict: "a dict", ast.Set: "a set", ast.GeneratorExp: "a generator", ast.SetComp: "a set",
            ast.DictComp: "a dict", ast.JoinedStr: "a string", ast.List: "a list",
            ast.Tuple: "a tuple"}.get(type(node), type(node).__name__)


def _assigned_value(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of the last module-level ``name = ...`` (None when not assigned that way)."""
    value = None
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = n.value
    return value


def zero_size_shape(shape: object) -> bool:
    """A plain shape (an int or a tuple of ints) with a zero or negative dimension."""
    if isinstance(shape, bool):
        return False
    if isinstance(shape, int):
        return shape <= 0
    return isinstance(shape, (tuple, list)) and any(isinstance(s, int) and not isinstance(s, bool) and s <= 0
                                                    for s in shape)


def nesting_depth(tree: ast.AST) -> int:
    """The depth of a syntax tree (iteratively: the tree may be deeper than the recursion limit)."""
    best, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return best


def _parse(source: str, path: str) -> ast.Module:
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise TaskFormatError(path, f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    except (RecursionError, MemoryError) as exc:
        raise TaskFormatError(path, f"an expression is nested too deeply to parse ({type(exc).__name__}); "
                                    f"split it into smaller statements") from None
    depth = nesting_depth(tree)
    if depth > MAX_NESTING:
        raise TaskFormatError(path, f"the code is nested {depth} levels deep (at most {MAX_NESTING}): "
                                    "split the deepest expression into smaller statements")
    return tree


def _check_literal_shapes(tree: ast.Module, path: str) -> None:
    """Shapes written as literals: none may have a zero-size dimension."""
    for cname in ("CHECK_SHAPES", "BENCH_SHAPES"):
        value = _assigned_value(tree, cname)
        if not isinstance(value, (ast.List, ast.Tuple)):
            continue
        for i, elt in enumerate(value.elts):
            try:
                shape = ast.literal_eval(elt)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if zero_size_shape(shape):
                raise TaskFormatError(path, f"{cname}[{i}] = {shape!r} has a zero-size dimension: every listed "
                                            "shape must hold elements")


def parse_task_source(source: str, path: str) -> TaskSpec:
    """Check the task format statically; raise ``TaskFormatError`` with one clear line."""
    if len(source.encode()) > MAX_TASK_BYTES:
        raise TaskFormatError(path, f"file is larger than {MAX_TASK_BYTES} bytes")
    if not source.strip():
        raise TaskFormatError(path, "the file is empty: see README (task format) for what a task defines")
    if "\x00" in source:
        raise TaskFormatError(path, "the file holds NUL bytes: not a Python source file")
    tree = _parse(source, path)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assigned: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                assigned.add(t.id)
    kernels = find_kernels(tree)
    if not kernels:
        raise TaskFormatError(path, "no kernel: define at least one @triton.jit function at module level")
    for fname, problem in REQUIRED_FUNCTIONS.items():
        if fname not in functions:
            raise TaskFormatError(path, problem)
    for cname, problem in REQUIRED_CONSTANTS.items():
        if cname not in assigned:
            raise TaskFormatError(path, problem)
    for cname in ("CHECK_SHAPES", "BENCH_SHAPES", "DTYPES"):
        node = next(n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    and any(isinstance(t, ast.Name) and t.id == cname
                            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])))
        value = node.value
        if isinstance(value, (ast.List, ast.Tuple)) and not value.elts:
            raise TaskFormatError(path, f"{cname} is empty: list at least one entry")
        if isinstance(value, _NOT_A_LIST):
            raise TaskFormatError(path, f"{cname} must be a list, got {_literal_kind(value)} "
                                        f"`{ast.unparse(value)[:60]}`")
    _check_literal_shapes(tree, path)
    tol = _assigned_value(tree, "TOLERANCE")
    if isinstance(tol, (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.JoinedStr)):
        raise TaskFormatError(path, f"TOLERANCE must be a dict {{dtype: {{'atol': ..., 'rtol': ...}}}}, got "
                                    f"{_literal_kind(tol)} `{ast.unparse(tol)[:60]}`")
    name = Path(path).stem
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NAME" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                name = node.value.value
    return TaskSpec(
        path=str(path),
        name=name,
        source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        kernels=kernels,
        launch_lineno=functions["launch"].lineno,
    )


def load_task(path: str | Path) -> TaskSpec:
    p = Path(path)
    if not p.exists():
        raise TaskFormatError(str(path), "no such file")
    if p.is_dir():
        raise TaskFormatError(str(path), "is a directory, not a task file (for a folder of tasks: `tritondx batch`)")
    if p.suffix != ".py":
        raise TaskFormatError(str(path), "a task must be a Python file (.py)")
    if not p.is_file():
        raise TaskFormatError(str(path), "not a regular file")
    try:
        if p.stat().st_size > MAX_TASK_BYTES:
            raise TaskFormatError(str(path), f"file is larger than {MAX_TASK_BYTES} bytes")
        source = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFormatError(str(path), f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})") from exc
    except OSError as exc:
        raise TaskFormatError(str(path), f"cannot be read: {exc.strerror or exc}") from exc
    return parse_task_source(source, str(path))
