"""Task settings the probe checks by running them (inside the sandboxed probe job); each problem is
one line, answered as ``tritondx: error: FILE: problem``, exit 2.

- ``check_shapes`` (before the first launch): every CHECK_SHAPES entry (and on a GPU every BENCH_SHAPES
  entry) built by ``make_inputs`` for every dtype, with no zero-size input, and a reference that
  returns finite values on it; on the CPU every BENCH_SHAPES entry built;
- ``leftover_threads`` (after it): task code (``launch``, or the module at import) leaves no non-daemon
  thread running: Python waits for one at exit, so the job would only end at its timeout.

Tolerances (finite, not negative) are checked where they are read (``task/module.py`` ``tolerance``); shapes with
a zero written in the task's literal lists already statically (``tools/task/spec.py``).
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any, Callable

import torch

from tritondx.tools.task.spec import zero_size_shape as _zero_dims
from tritondx.tools.task.module import as_tuple, dtype_name, norm_shape

# How long threads ``launch`` started may take to finish before they count as left running.
THREAD_GRACE_S = 1.0
# On these devices BENCH_SHAPES are only built (a reference on them can take minutes on a CPU).
CPU_DEVICES = ("cpu",)
# How verify/judge/probe.py (_user_call) words a MemoryError / allocation failure.
OOM_TEXT = "ran out of memory"

UserCall = Callable[..., tuple[Any, "str | None"]]


def check_shape(mod: ModuleType, listname: str, index: int, shape: Any, dtype: torch.dtype, device: str,
                call: UserCall) -> str | None:
    """``make_inputs`` builds ``shape``, no input is empty, the reference's outputs are finite."""
    where = f"{listname}[{index}] = {shape!r}"
    if _zero_dims(shape):
        return f"{where} has a zero-size dimension: every listed shape must hold elements"
    text = f"make_inputs({shape!r}, {dtype_name(dtype)}, seed=1234, device={device!r})"
    raw, problem = call(text, mod.make_inputs, shape, dtype, 1234, device)
    if problem:
        return f"{where}: {problem}"
    inputs = as_tuple(raw)
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if not tensors or len(tensors) + sum(isinstance(t, (int, float, bool)) for t in inputs) != len(inputs):
        kinds = sorted({type(t).__name__ for t in inputs})
        return f"{where}: {text} must return tensors (and plain scalars), got {kinds}"
    empty = next((i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.numel() == 0), None)
    if empty is not None:
        return f"{where}: {text} returned input {empty} with zero elements (a zero-size shape)"
    raw, problem = call("reference", mod.reference, *[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    if problem:
        return f"{where}: {problem}"
    for i, r in enumerate(as_tuple(raw)):
        if isinstance(r, torch.Tensor) and r.numel() and (r.is_floating_point() or r.is_complex()) \
                and not bool(torch.isfinite(r).all()):
            bad = int((~torch.isfinite(r)).sum())
            return (f"{where}: the reference returned NaN/Inf ({bad} of {r.numel()} elements of output {i}) on "
                    f"{text}: a reference must give finite values on the inputs make_inputs builds")
    return None


def check_shapes(mod: ModuleType, dtypes: list[torch.dtype], device: str, call: UserCall) -> str | None:
    """The first problem of any listed shape, or None. ``call(what, fn, *args)`` calls task code:
    (result, None) or (None, one-line problem). On the CPU, BENCH_SHAPES (sized for a GPU) are only
    built, not run through the reference, and one too large for the host's memory is no problem."""
    lists = [("CHECK_SHAPES", mod.CHECK_SHAPES, True), ("BENCH_SHAPES", mod.BENCH_SHAPES, device not in CPU_DEVICES)]
    for listname, shapes, full in lists:
        for i, raw in enumerate(shapes):
            shape = norm_shape(raw)
            for d in dtypes if full else dtypes[:1]:
                if full:
                    problem = check_shape(mod, listname, i, shape, d, device, call)
                elif _zero_dims(shape):
                    problem = f"{listname}[{i}] = {shape!r} has a zero-size dimension: every listed shape must hold elements"
                else:
                    _, problem = call(f"make_inputs({shape!r}, {dtype_name(d)}, seed=1234, device={device!r})",
                                      mod.make_inputs, shape, d, 1234, device)
                    problem = None if problem and OOM_TEXT in problem else (problem and f"{listname}[{i}] = "
                                                                                       f"{shape!r}: {problem}")
                if problem:
                    return problem
    return None


def leftover_threads() -> str | None:
    """A non-daemon thread (other than the main one) still running after a grace period."""
    deadline = time.monotonic() + THREAD_GRACE_S
    left = []
    for t in threading.enumerate():
        if t.daemon or t is threading.main_thread():
            continue
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            left.append(t.name)
    if left:
        return (f"task code left {len(left)} non-daemon thread(s) running ({', '.join(sorted(left)[:3])}): "
                "join them before launch returns, or make them daemon threads")
    return None
