"""Compiles ahead, in threads, inside the tune job (the sandboxed worker): what the job will run next is compiled
into Triton's on-disk cache while the job does something else, so its own first call of a kernel reads the cache.

Configurations (``Precompiler.submit``): a thread loads the configuration's module with the knobs set for that
thread alone (``knob.LOCAL``) and calls its ``launch`` on meta-device twins of the inputs with every Triton launch
turned into a warm-up: the kernels are compiled with the launch's constexprs and options, nothing runs on the device
(the timer's exclusive hold is not disturbed), and the module is dropped. (An autotuned kernel's configuration has
one config, so its autotuner times nothing and launches it as a warm-up too.) The initial kernel's own compiles
come from the probe's trusted cache layer (``run.tune_task``).

Triton's compile releases the GIL in its MLIR passes and ptxas runs as a process, so the threads compile side by
side (on a 2-core CPU, 4 cuda:90 compiles took 0.86 s one after another and 0.24 s on two threads). A launcher
that cannot run on meta tensors (it reads a value back, asks for a CUDA device) compiles nothing ahead; the job
compiles it as before.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import torch

from tritondx.tools.task.module import load_module
from tritondx.tools.tune import knob as knobmod

#: threads that compile ahead (``Precompiler``); 0 turns it off
PRECOMPILE_THREADS = 4
#: how long the job waits for a compile ahead before it compiles the thing itself
PRECOMPILE_WAIT_S = 60.0

_COMPILE_ONLY = threading.local()
_PATCHED: list = []


def _compile_only(fn: Callable[[], Any]) -> Any:
    """``fn()`` on this thread with every Triton launch a warm-up."""
    _COMPILE_ONLY.on = True
    try:
        return fn()
    finally:
        _COMPILE_ONLY.on = False


def install_compile_only() -> bool:
    """Wrap ``JITFunction.run`` once so that, on a thread with ``_COMPILE_ONLY.on``, every launch is a warm-up
    (compiled into Triton's cache, not run). Other threads are untouched. False where Triton has no
    ``JITFunction.run``."""
    if _PATCHED:
        return True
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    orig = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        if getattr(_COMPILE_ONLY, "on", False):
            warmup = True
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
    JITFunction.run = run
    _PATCHED.append(orig)
    return True


def meta(x: Any) -> Any:
    """A tensor's twin on the meta device (same shape, strides, dtype; no memory, no device work)."""
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
    return x


class Precompiler:
    """The job's compile-ahead pool (see the module's text). ``knobs_of(cfg)`` is the ``knob.CURRENT`` of a
    configuration; set it before ``submit``."""

    def __init__(self, inst_path: str, inputs: tuple, threads: int,
                 knobs_of: Callable[[dict[str, int]], dict] | None = None) -> None:
        self.inst_path, self.knobs_of = inst_path, knobs_of
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="precompile")
        self.futures: dict[tuple, Any] = {}
        self.meta_inputs = tuple(meta(x) for x in inputs)
        self.stats = {"submitted": 0, "compiled": 0, "failed": 0, "waited_s": 0.0, "first_error": ""}

    def _launch(self, path: str, label: str, knobs: dict | None) -> str:
        knobmod.LOCAL.current = dict(knobs) if knobs is not None else None
        name = ""
        try:
            mod = load_module(path, label)
            name = mod.__name__
            _compile_only(lambda: mod.launch(*self.meta_inputs))
            return ""
        except Exception as exc:   # the job compiles this itself
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        finally:
            knobmod.LOCAL.current = None
            sys.modules.pop(name, None)

    def _one(self, cfg: dict[str, int]) -> str:
        return self._launch(self.inst_path, "pre", (self.knobs_of or (lambda c: {}))(cfg))

    def submit(self, cfgs: list[dict[str, int]]) -> None:
        for cfg in cfgs:
            key = tuple(sorted(cfg.items()))
            if key in self.futures:
                continue
            self.futures[key] = self.pool.submit(self._one, dict(cfg))
            self.stats["submitted"] += 1

    def ready(self, cfg: dict[str, int]) -> bool:
        """Whether ``cfg``'s compile ahead has ended (or none was submitted: nothing to wait for)."""
        fut = self.futures.get(tuple(sorted(cfg.items())))
        return fut is None or fut.done()

    def wait(self, cfg: dict[str, int]) -> None:
        """Until ``cfg``'s compile ahead (if one was submitted) ends, at most ``PRECOMPILE_WAIT_S``."""
        fut = self.futures.get(tuple(sorted(cfg.items())))
        if fut is None:
            return
        t0 = time.monotonic()
        try:
            err = fut.result(timeout=PRECOMPILE_WAIT_S)
        except Exception as exc:
            err = f"{type(exc).__name__}"
        self.stats["waited_s"] += time.monotonic() - t0
        if getattr(fut, "_counted", False):
            return
        fut._counted = True
        if err:
            self.stats["failed"] += 1
            self.stats["first_error"] = self.stats["first_error"] or err
        else:
            self.stats["compiled"] += 1

    def close(self) -> dict[str, Any]:
        for f in self.futures.values():
            f.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        return {**self.stats, "waited_s": round(self.stats["waited_s"], 2)}
