"""The probe of a task (runs inside the sandboxed worker) and what the judge shares with it
(the input check, the device phase). A candidate is verified by
``tools/verify/judge/job.py`` (trusted) and ``tools/verify/runner/runner.py`` (untrusted, its own process).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import torch

from tritondx.tools.exec.gpulock import phase
from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.verify.plan.buffers import degenerate_inputs
from tritondx.tools.verify.judge.compare import compare
from tritondx.tools.verify.runner.guard import LaunchGuard
from tritondx.tools.task.probe import check_shapes, leftover_threads
from tritondx.tools.task.module import (as_tuple, dtype_name, load_module, norm_shape, to_dtype, tolerance,
                                     tolerance_entries)


@contextlib.contextmanager
def device_phase(device: str, urgent: bool = False, release: bool = True):
    """Hold the device (shared) for a block of checks, then give the caching allocator's memory back
    to the device: jobs of a batch share one GPU, and memory a job keeps reserved between its checks
    made honest candidates of other jobs run out of memory (16 of 153 verifications on the H200,
    2026-11-30). ``urgent``: past a queued timer (``gpulock.phase``). ``release=False``: the memory stays
    (a later phase of the same checks gives it back)."""
    with phase("shared", urgent):
        try:
            yield
        finally:
            if release and device.startswith("cuda"):
                import gc
                gc.collect()
                torch.cuda.empty_cache()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _check_inputs(inputs: tuple, where: str, reference) -> None:
    """An all-zero input is a degenerate one unless it is a destination the kernel writes into
    (tools/verify/plan/buffers.py tells them apart through the reference)."""
    degenerate = degenerate_inputs(reference, inputs)
    if degenerate:
        raise Rejected("bad_inputs", f"{where}: {degenerate[0]}")


_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory")


def _user_call(what: str, fn, *args) -> tuple[Any, str | None]:
    """Call task code; (result, None), or (None, one-line problem) for anything it raises or exits with."""
    try:
        return fn(*args), None
    except SystemExit as exc:
        return None, f"{what} called sys.exit({exc.code!r})"
    except (MemoryError, RuntimeError) as exc:
        text = " ".join(str(exc).split())
        if isinstance(exc, MemoryError) or any(m in text.lower() for m in _OOM_TEXT):
            asked = re.search(r"tried to allocate (\d+) bytes", text)
            size = f" (asked for {int(asked.group(1)) / 2 ** 30:.1f} GiB)" if asked else ""
            return None, (f"{what} ran out of memory{size}: the shape is too large for this device "
                          f"({type(exc).__name__})")
        return None, f"{what} raised {type(exc).__name__}: {text[:300]}"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return None, f"{what} raised {type(exc).__name__}: {first[:300]}"


def probe(job: dict[str, Any]) -> dict[str, Any]:
    """Check what a task's format cannot show statically; record the ops the launcher uses.

    Every problem is answered as ``{"ok": False, "problem": <one line>}``: task code that raises,
    exits, runs out of memory, returns the wrong kind of thing, or whose kernel does not compile
    (named with its source line)."""
    path = job["task"]
    device = job["device"]
    from tritondx.tools.exec.gpulock import autotune_exclusive
    # an autotuner's configs compile in threads; its picks serve nothing later, so it times them in the hold it has
    with device_phase(device), autotune_exclusive(device.startswith("cuda"), exclusive=False):
        return _probe(path, device)


def _probe(path: str, device: str) -> dict[str, Any]:
    mod = load_module(path, "probe")
    for name in ("CHECK_SHAPES", "BENCH_SHAPES", "DTYPES"):
        value = getattr(mod, name)
        if not isinstance(value, (list, tuple)) or not value:
            return {"ok": False, "problem": f"{name} must be a non-empty list, got {type(value).__name__}"}
    try:
        dtypes = [to_dtype(d) for d in mod.DTYPES]
    except ValueError as exc:
        return {"ok": False, "problem": f"DTYPES: {exc}"}
    for d in dtypes:
        try:
            tolerance(mod, d)
        except Exception as exc:
            return {"ok": False, "problem": getattr(exc, "problem", None) or str(exc)}
    shape = norm_shape(mod.CHECK_SHAPES[0])
    call = f"make_inputs({shape!r}, {dtype_name(dtypes[0])}, seed=1234, device={device!r})"
    raw, problem = _user_call(call, mod.make_inputs, shape, dtypes[0], 1234, device)
    if problem:
        return {"ok": False, "problem": problem}
    inputs = as_tuple(raw)
    if not inputs or not all(isinstance(t, (torch.Tensor, int, float, bool)) for t in inputs):
        kinds = sorted({type(t).__name__ for t in inputs})
        return {"ok": False, "problem": f"make_inputs must return tensors (and plain scalars), got {kinds}"}
    if not any(isinstance(t, torch.Tensor) for t in inputs):
        return {"ok": False, "problem": "make_inputs returned no tensor"}
    try:
        _check_inputs(inputs, call, mod.reference)
    except Rejected as exc:
        return {"ok": False, "problem": exc.reason}
    raw, problem = _user_call("reference", mod.reference, *[t.clone() if isinstance(t, torch.Tensor) else t
                                                            for t in inputs])
    if problem:
        return {"ok": False, "problem": problem}
    refs = as_tuple(raw)
    if not refs or not all(isinstance(r, torch.Tensor) for r in refs):
        kinds = sorted({type(r).__name__ for r in refs})
        return {"ok": False, "problem": f"reference must return tensors, got {kinds}"}
    if problem := check_shapes(mod, dtypes, device, _user_call):  # every listed shape: tools/task/probe.py
        return {"ok": False, "problem": problem}
    guard = LaunchGuard()
    guard.install()
    try:
        with guard.watch(poison=False):
            outs = as_tuple(mod.launch(*inputs))
        _sync(device)
    except SystemExit as exc:
        return {"ok": False, "problem": f"launch called sys.exit({exc.code!r})"}
    except Exception as exc:
        if guard.kernel_error is not None:
            from tritondx.tools.exec.kernel_errors import describe_kernel_error
            return {"ok": False, "problem": describe_kernel_error(guard.kernel_error, path, guard.kernel_error_name)}
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"ok": False, "problem": f"launch raised {type(exc).__name__}: {first[:300]}"}
    if guard.launches == 0:
        return {"ok": False, "problem": "launch ran no Triton kernel"}
    if len(outs) != len(refs):
        return {"ok": False, "problem": f"launch returned {len(outs)} outputs, reference {len(refs)}"}
    for i, (o, r) in enumerate(zip(outs, refs)):
        atol, rtol = tolerance(mod, dtypes[0], output=i)
        if not isinstance(o, torch.Tensor):
            return {"ok": False, "problem": f"launch output {i} is {type(o).__name__}, not a tensor"}
        if o.shape != r.shape or o.dtype != r.dtype:
            return {"ok": False, "problem": f"launch output {i} is {tuple(o.shape)} {o.dtype}, "
                                            f"reference gives {tuple(r.shape)} {r.dtype}"}
        # The initial kernel is the baseline every candidate is measured against: it must be right.
        bad = compare(o, r, atol, rtol)
        if bad:
            return {"ok": False, "problem": f"the initial launch does not match the reference on {call}: "
                                            f"output {i}: {bad['reason']}"}
    if problem := leftover_threads():  # tools/task/probe.py
        return {"ok": False, "problem": problem}
    return {"ok": True, "ops": sorted(set(guard.ops)), "launches": guard.launches,
            "dtypes": [dtype_name(d) for d in dtypes],
            "tolerances": {dtype_name(d): list(tolerance(mod, d)) for d in dtypes},
            "tolerance_entries": {dtype_name(d): {str(k): list(v) for k, v in tolerance_entries(mod, d).items()}
                                  for d in dtypes},
            "n_inputs": len(inputs), "n_outputs": len(outs)}
