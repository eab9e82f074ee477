"""Loading a task module and reading its parts. Runs only inside a sandboxed worker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from tritondx.errors import TaskFormatError

_counter = 0


def load_module(path: str, label: str = "task") -> ModuleType:
    """Import a task file under a fresh module name (so two versions can live side by side)."""
    global _counter
    _counter += 1
    name = f"tritondx_{label}_{_counter}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskFormatError(path, "cannot be imported as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # triton's JIT looks the module up for globals
    try:
        spec.loader.exec_module(mod)
    except ImportError as exc:
        raise TaskFormatError(path, f"import failed: {exc}") from exc
    except SyntaxError as exc:
        raise TaskFormatError(path, f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    except Exception as exc:  # user code at import time: report it as a task problem
        raise TaskFormatError(path, f"raised at import: {type(exc).__name__}: {exc}") from exc
    except SystemExit as exc:  # sys.exit() / exit() at import would end the worker without a word
        raise TaskFormatError(path, f"called sys.exit({exc.code!r}) at import") from None
    return mod


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def to_dtype(value: Any) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    d = getattr(torch, str(value).replace("torch.", ""), None)
    if not isinstance(d, torch.dtype):
        raise ValueError(f"unknown dtype {value!r}")
    return d


def tolerance(mod: ModuleType, dtype: torch.dtype) -> tuple[float, float]:
    path = getattr(mod, "__file__", "?")
    tol = getattr(mod, "TOLERANCE", None)
    if not isinstance(tol, dict):
        raise TaskFormatError(path, f"TOLERANCE must be a dict {{dtype: {{'atol': ..., 'rtol': ...}}}}, "
                                    f"got {type(tol).__name__}")
    table = {dtype_name(k): v for k, v in tol.items()}
    entry = table.get(dtype_name(dtype))
    if entry is None:
        raise TaskFormatError(path, f"TOLERANCE has no entry for {dtype_name(dtype)}")
    try:
        if isinstance(entry, dict):
            return float(entry.get("atol", 0.0)), float(entry.get("rtol", 0.0))
        atol, rtol = entry
        return float(atol), float(rtol)
    except (TypeError, ValueError) as exc:
        raise TaskFormatError(path, f"TOLERANCE[{dtype_name(dtype)}] must be {{'atol': float, 'rtol': float}} "
                                    f"or (atol, rtol), got {entry!r:.60}") from exc


def as_tuple(out: Any) -> tuple:
    if isinstance(out, (tuple, list)):
        return tuple(out)
    return (out,)


def norm_shape(shape: Any) -> Any:
    """Shapes are tuples, ints or dicts; JSON turns tuples into lists, so turn them back."""
    if isinstance(shape, list):
        return tuple(norm_shape(s) for s in shape)
    if isinstance(shape, dict):
        return {k: norm_shape(v) for k, v in shape.items()}
    return shape


def tensor_bytes(ts: tuple) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def roofline_counts(mod: ModuleType, shape: Any, dtype: torch.dtype, inputs: tuple, outputs: tuple) -> tuple[int, int]:
    """(bytes that must move, FLOPs that must be done) for one shape."""
    if hasattr(mod, "min_bytes"):
        nbytes = int(mod.min_bytes(shape, dtype))
    else:
        nbytes = tensor_bytes(inputs) + tensor_bytes(outputs)
    flops = int(mod.flops(shape, dtype)) if hasattr(mod, "flops") else 0
    return nbytes, flops


def task_file(path: str) -> str:
    return str(Path(path).resolve())
