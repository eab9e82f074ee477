"""One line for an exception that a Triton kernel raised: the kernel, the task's source line, the cause.

Runs inside a sandboxed worker. Under the interpreter an invalid kernel fails while it runs
(``InterpreterError`` chained to the real error, whose traceback passes through the task file); on a
GPU it fails to compile (``CompilationError``, whose ``node.lineno`` counts from the kernel's ``def``).
Either way the user wants the kernel's name and the line of *their* file, e.g.

    kernel axpy_kernel does not compile: line 11 `offs = pid * BLOCK + tl.arange(0, 100)`:
    ValueError: arange's range must be a power of 2
"""

from __future__ import annotations

import ast
import traceback
from pathlib import Path


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 10:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _def_line(task_path: str, kernel: str) -> int | None:
    try:
        tree = ast.parse(Path(task_path).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            return node.lineno
    return None


def _last_text(exc: BaseException) -> str:
    """The cause without the source excerpt Triton puts in front of it."""
    msg = getattr(exc, "error_message", None)
    text = str(msg if msg else exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() != "^"]
    return lines[-1] if lines else ""


def source_line_of(exc: BaseException, task_path: str, kernel: str = "") -> tuple[int, str] | None:
    """(line number, source text) in ``task_path`` where the kernel failed, when it can be told."""
    task = str(Path(task_path).resolve())
    lines = Path(task_path).read_text(errors="replace").splitlines() if Path(task_path).is_file() else []
    # GPU path: a CompilationError knows the node, relative to the kernel's ``def`` line.
    for e in _chain(exc):
        node, src = getattr(e, "node", None), getattr(e, "src", None)
        if node is not None and hasattr(node, "lineno") and isinstance(src, str):
            rel = node.lineno
            text = src.split("\n")[rel - 1].strip() if 0 < rel <= len(src.split("\n")) else ""
            start = _def_line(task_path, kernel) if kernel else None
            if start is not None:
                line = start + rel - 1
                if 0 < line <= len(lines) and lines[line - 1].strip() == text:
                    return line, text
            if text:  # the text at least; search the task for it
                hits = [i + 1 for i, ln in enumerate(lines) if ln.strip() == text]
                if len(hits) == 1:
                    return hits[0], text
    # Interpreter path: the deepest frame of the task file, root cause first (the wrapping
    # InterpreterError's own traceback only reaches the launcher's line).
    for e in reversed(_chain(exc)):
        frames = [f for f in traceback.extract_tb(e.__traceback__) if _same(f.filename, task)]
        if frames:
            f = frames[-1]
            return f.lineno or 0, (f.line or "").strip()
    return None


def _same(a: str, b: str) -> bool:
    try:
        return str(Path(a).resolve()) == b
    except (OSError, ValueError):
        return False


def describe_kernel_error(exc: BaseException, task_path: str, kernel: str) -> str:
    """``kernel K does not compile: line N `text`: Type: cause`` (one line)."""
    where = source_line_of(exc, task_path, kernel)
    root = _chain(exc)[-1]
    # The interpreter wraps the real error; name the real one.
    if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        root = exc.__cause__
    elif getattr(exc, "node", None) is not None:
        root = exc
    at = f" line {where[0]} `{where[1][:120]}`:" if where else ""
    return f"kernel {kernel or '?'} does not compile:{at} {type(root).__name__}: {_last_text(root)[:300]}"
