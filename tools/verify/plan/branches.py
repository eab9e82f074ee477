"""Branches a candidate adds or changes (``added_branches``), read from the source only (the candidate is never
imported here): every ``if`` statement and conditional expression in the file's functions, launcher, helpers and
``@triton.jit`` kernels. A branch is *changed* when its test is new (or sits in a new function): then both sides
must be reached; when only one arm's code differs from the original's branch with the same test, that arm must be
reached. A side that runs the original code path unchanged needs no check (``original_path.py``); which side a
given input reaches is :mod:`.launch_walk`'s.
"""

from __future__ import annotations

import ast
from collections import Counter

from pydantic import BaseModel

from tritondx.tools.verify.plan.evaluator import dotted
from tritondx.tools.verify.plan.original_path import EXITS, original_side


class Branch(BaseModel):
    key: str                       # "func:line:col"
    func: str                      # top-level function holding it
    line: int
    test: str                      # the condition, as written
    in_kernel: bool
    needs: list[bool]              # sides that must be reached: [True, False] for a new test
    why: str                       # "new test" / "body changed" / "else changed" / "new function"
    true_line: int | None = None   # first line of each arm (for a line trace); None: falls through
    false_line: int | None = None  # an empty else after a body that always leaves: the next statement's line
    cuda_side: bool | None = None  # a device-kind test (``t.is_cuda``): the side that runs on a CUDA device
    atoms: int = 0                 # device-kind parts of the test (``t.is_cuda and n > 0``: 1); see flip.py
    arms: list[list[int]] = []     # a conditional expression: (line, col, end line, end col) of each arm
    original: list[bool] = []      # sides that are the original code path unchanged: need no check (see below)


def is_kernel(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = dotted(target) or ""
        if name.endswith("jit") or name.endswith("autotune") or name.endswith("heuristics"):
            return True
    return False


def _conditions(fn: ast.FunctionDef) -> list[ast.AST]:
    return [n for n in ast.walk(fn) if isinstance(n, (ast.If, ast.IfExp))]


def _arms(node: ast.AST) -> tuple[str, str]:
    if isinstance(node, ast.If):
        return "\n".join(ast.unparse(s) for s in node.body), "\n".join(ast.unparse(s) for s in node.orelse)
    return ast.unparse(node.body), ast.unparse(node.orelse)  # type: ignore[attr-defined]


def _first_line(node: ast.AST, arm: str) -> int | None:
    if isinstance(node, ast.If):
        stmts = node.body if arm == "body" else node.orelse
        return stmts[0].lineno if stmts else None
    return None


def _next_statements(fn: ast.FunctionDef) -> dict[int, ast.stmt]:
    """id(statement) -> the statement after it in the same block."""
    out: dict[int, ast.stmt] = {}
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                for a, b in zip(block, block[1:]):
                    out[id(a)] = b
    return out


def _false_line(node: ast.AST, nexts: dict[int, ast.stmt]) -> int | None:
    """First line of the false side: the else arm's, or for ``if c: ...; return`` with no else, the
    statement after the ``if`` (it runs only when the body did not). None: no line shows it."""
    first = _first_line(node, "orelse")
    if first is not None or not isinstance(node, ast.If) or not isinstance(node.body[-1], EXITS):
        return first
    after = nexts.get(id(node))
    return after.lineno if after is not None else None


def _device_type(node: ast.AST) -> bool:
    """``t.device.type`` for a name ``t``."""
    return (isinstance(node, ast.Attribute) and node.attr == "type" and isinstance(node.value, ast.Attribute)
            and node.value.attr == "device" and isinstance(node.value.value, ast.Name))


def cuda_side(test: ast.AST) -> bool | None:
    """The side of a device-kind test that runs on a CUDA device: ``t.is_cuda``, ``t.device.type ==
    "cuda"`` and ``torch.cuda.is_available()`` -> True, their negations -> False; None for any other
    test. Such a test is constant on one device (every input a case gets lives on the verifier's device,
    a CUDA verifier runs where CUDA is available): no input reaches its other side there."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = cuda_side(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda" and isinstance(test.value, ast.Name):
        return True
    if isinstance(test, ast.Call) and not test.args and not test.keywords \
            and (dotted(test.func) or "").endswith("cuda.is_available"):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        a, b = test.left, test.comparators[0]
        if isinstance(a, ast.Constant):
            a, b = b, a
        if _device_type(a) and isinstance(b, ast.Constant) and b.value == "cuda":
            return isinstance(test.ops[0], ast.Eq)
    return None


def device_atoms(test: ast.AST) -> list[tuple[ast.AST, bool]]:
    """The device-kind parts of a test (``t.is_cuda``, ``t.device.type == "cuda"``) with their value on a
    CUDA device: the whole test, or parts of one (``t.is_cuda and n > 0``, ``not t.is_cuda``)."""
    return [(n, side) for n in ast.walk(test) if isinstance(n, (ast.Attribute, ast.Compare, ast.Call))
            and (side := cuda_side(n)) is not None]


def _span(node: ast.AST) -> list[int]:
    return [node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0]


def all_branches(tree: ast.Module) -> list[tuple[ast.FunctionDef, ast.AST]]:
    out = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            out += [(fn, n) for n in _conditions(fn)]
    return out


def added_branches(original_source: str, candidate_source: str) -> list[Branch]:
    """The candidate's branches that the original does not have (by function and test), or whose
    arm's code differs from every original branch with the same test."""
    orig = ast.parse(original_source)
    cand = ast.parse(candidate_source)
    orig_tests: Counter[tuple[str, str]] = Counter()
    orig_arms: dict[tuple[str, str], list[tuple[str, str]]] = {}
    orig_funcs = {fn.name for fn in orig.body if isinstance(fn, ast.FunctionDef)}
    for fn, node in all_branches(orig):
        k = (fn.name, ast.unparse(node.test))
        orig_tests[k] += 1
        orig_arms.setdefault(k, []).append(_arms(node))
    out: list[Branch] = []
    nexts = {fn.name: _next_statements(fn) for fn in cand.body if isinstance(fn, ast.FunctionDef)}
    for fn, node in all_branches(cand):
        test = ast.unparse(node.test)
        k = (fn.name, test)
        body, orelse = _arms(node)
        if fn.name not in orig_funcs:
            needs, why = [True, False], "new function"
        elif orig_tests[k] == 0:
            needs, why = [True, False], "new test"
        else:
            arms = orig_arms[k]
            needs = []
            if body not in {a for a, _ in arms}:
                needs.append(True)
            if orelse not in {b for _, b in arms}:
                needs.append(False)
            if not needs:
                continue
            why = "body changed" if needs == [True] else "else changed" if needs == [False] else "both arms changed"
        original = [side for side in needs if original_side(orig, cand, fn, node, side)] \
            if fn.name in orig_funcs else []
        if original:
            needs = [s for s in needs if s not in original]
            why += "; its " + " and ".join("true" if s else "false" for s in original) + \
                " side is the original code path, unchanged: needs no check"
            if not needs:
                continue
        out.append(Branch(key=f"{fn.name}:{node.lineno}:{node.col_offset}", func=fn.name, line=node.lineno,
                          test=test, in_kernel=is_kernel(fn), needs=needs, why=why,
                          true_line=_first_line(node, "body"), false_line=_false_line(node, nexts[fn.name]),
                          cuda_side=cuda_side(node.test), atoms=len(device_atoms(node.test)),
                          arms=[_span(node.body), _span(node.orelse)] if isinstance(node, ast.IfExp) else [],
                          original=original))
    return out
