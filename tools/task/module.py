"""Loading a task module and reading its parts. Runs only inside a sandboxed worker."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from tritondx.errors import TaskFormatError

_counter = 0
_COUNTER_LOCK = threading.Lock()


def load_module(path: str, label: str = "task") -> ModuleType:
    """Import a task file under a fresh module name (so two versions can live side by side)."""
    global _counter
    with _COUNTER_LOCK:   # the tune job loads configurations from several threads
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
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        round_robin_autotuners(mod)
    return mod


def round_robin_autotuners(mod: ModuleType) -> int:
    """Under the interpreter, make every ``triton.autotune`` kernel of ``mod`` run its configurations in turn.

    The interpreter has no active driver, so the autotuner's benchmark (``driver.active.get_benchmarker()``)
    raises ``RuntimeError: 0 active drivers`` on the first call with more than one configuration. Here each
    call instead picks the next configuration (call i runs configuration i mod n) without running any
    kernel to "time" it, so the verifier's calls (shapes x seeds) check the configurations one after another
    and every output still comes from exactly one launch of one configuration. Returns how many autotuners
    were changed. On a GPU nothing is changed (the real autotuner times the configurations).
    """
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover
        return 0
    done: set[int] = set()
    for value in list(vars(mod).values()):
        fn, depth = value, 0
        while fn is not None and depth < 8:   # heuristics(autotune(jit)) and the like
            if isinstance(fn, Autotuner) and id(fn) not in done and len(fn.configs) > 1:
                done.add(id(fn))
                _round_robin(fn)
            fn, depth = getattr(fn, "fn", None), depth + 1
    return len(done)


def _round_robin(tuner: Any) -> None:
    state = {"call": 0, "bench": 0, "pick": 0}
    original_run = tuner.run

    def fake_bench(kernel_call, quantiles=None, **_):
        # the j-th "timing" of one tuning pass belongs to the j-th (pruned) configuration: the picked
        # one reads fastest; no kernel runs here
        j = state["bench"]
        state["bench"] += 1
        t = 0.0 if j == state["pick"] else 1.0
        return [t, t, t] if quantiles else t

    def run(*args, **kwargs):
        state["pick"] = state["call"] % len(tuner.configs)
        state["call"] += 1
        state["bench"] = 0
        tuner.cache.clear()   # tune again on every call: the next configuration wins
        return original_run(*args, **kwargs)

    tuner.do_bench = fake_bench   # a cached_property on Autotuner: the instance attribute takes its place
    tuner.run = run


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def to_dtype(value: Any) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    d = getattr(torch, str(value).replace("torch.", ""), None)
    if not isinstance(d, torch.dtype):
        raise ValueError(f"unknown dtype {value!r}")
    return d


def tolerance(mod: ModuleType, dtype: torch.dtype, output: int | None = None) -> tuple[float, float]:
    """(atol, rtol) of ``dtype``; of one output when ``output`` is given.

    ``TOLERANCE[dtype]`` is ``{"atol": a, "rtol": r}`` or ``(a, r)`` for every output, or one such
    entry per output: a list/tuple of entries (``[{"atol": 1, "rtol": 0}, {"atol": 0, "rtol": 1e-3}]``,
    an int8 tensor and its fp16 scales) or a dict keyed by output index (``{0: ..., 1: ...}``). Without
    ``output`` a per-output table gives the loosest entry (the largest atol and rtol)."""
    entries = tolerance_entries(mod, dtype)
    if output is None:
        return max(a for a, _ in entries.values()), max(r for _, r in entries.values())
    if output in entries:
        return entries[output]
    if -1 in entries:
        return entries[-1]
    path = getattr(mod, "__file__", "?")
    raise TaskFormatError(path, f"TOLERANCE[{dtype_name(dtype)}] has no entry for output {output}")


def tolerance_entries(mod: ModuleType, dtype: torch.dtype) -> dict[int, tuple[float, float]]:
    """{output index: (atol, rtol)}; key -1 when one entry covers every output."""
    path = getattr(mod, "__file__", "?")
    tol = getattr(mod, "TOLERANCE", None)
    if not isinstance(tol, dict):
        raise TaskFormatError(path, f"TOLERANCE must be a dict {{dtype: {{'atol': ..., 'rtol': ...}}}}, "
                                    f"got {type(tol).__name__}")
    table = {dtype_name(k): v for k, v in tol.items()}
    entry = table.get(dtype_name(dtype))
    if entry is None:
        raise TaskFormatError(path, f"TOLERANCE has no entry for {dtype_name(dtype)}")
    where = f"TOLERANCE[{dtype_name(dtype)}]"
    if isinstance(entry, dict) and entry and all(isinstance(k, int) and not isinstance(k, bool) for k in entry):
        return {int(k): _tol_pair(path, f"{where}[{k}]", v) for k, v in entry.items()}
    if isinstance(entry, (list, tuple)) and entry and all(isinstance(e, (dict, list, tuple)) for e in entry):
        return {i: _tol_pair(path, f"{where}[{i}]", e) for i, e in enumerate(entry)}
    return {-1: _tol_pair(path, where, entry)}


def _tol_pair(path: str, where: str, entry: Any) -> tuple[float, float]:
    try:
        if isinstance(entry, dict):
            pair = float(entry.get("atol", 0.0)), float(entry.get("rtol", 0.0))
        else:
            atol, rtol = entry
            pair = float(atol), float(rtol)
    except (TypeError, ValueError) as exc:
        raise TaskFormatError(path, f"{where} must be {{'atol': float, 'rtol': float}} "
                                    f"or (atol, rtol), got {entry!r:.60}") from exc
    for name, value in zip(("atol", "rtol"), pair):
        if not math.isfinite(value) or value < 0:  # NaN passes every comparison; a negative one none
            raise TaskFormatError(path, f"{where} {name} is {value}: it must be a finite number >= 0")
    return pair


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


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bits (NaNs included), element by element in order."""
    x, y = a.detach().reshape(-1).contiguous(), b.detach().reshape(-1).contiguous()
    return x.numel() == y.numel() and x.dtype == y.dtype and torch.equal(x.view(torch.uint8), y.view(torch.uint8))


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
