"""Compiles ahead, in threads, inside the tune job (the sandboxed worker): what the job will run next is compiled
into Triton's on-disk cache while the job does something else, so its own first call of a kernel reads the cache.

Two things are compiled ahead:

- **configurations** (``Precompiler.submit``): a thread loads the configuration's module with the knobs set for
  that thread alone (``knob.LOCAL``) and calls its ``launch`` on meta-device twins of the inputs with every Triton
  launch turned into a warm-up: the kernels are compiled with the launch's constexprs and options, nothing runs on
  the device (the timer's exclusive hold is not disturbed), and the module is dropped;
- **the initial kernel's autotuners** (``Precompiler.warm_autotuners``): the task's ``launch`` is called the same
  way before the job records it, and every ``@triton.autotune`` it reaches hands each of its configs to the pool as
  a warm-up of its own. The recorded call then autotunes from the cache: on the H200 corpus batches of 2026-12-04/05
  the tune job of a kernel autotuned over 36 configs spent 60-90 s compiling them one after another there.

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
    """``fn()`` on this thread with every Triton launch a warm-up (and autotuners handing their configs on)."""
    _COMPILE_ONLY.on = True
    try:
        return fn()
    finally:
        _COMPILE_ONLY.on = False


def install_compile_only() -> bool:
    """Wrap ``JITFunction.run`` and ``Autotuner.run`` once so that, on a thread with ``_COMPILE_ONLY.on``, every
    launch is a warm-up (compiled into Triton's cache, not run) and an autotuner warms each of its configs (on the
    pool in ``_COMPILE_ONLY.pool`` where there is one) instead of timing them. Other threads are untouched. False
    where Triton has no ``JITFunction.run``."""
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
    _PATCHED.append(("jit", orig))
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return True
    orig_at = Autotuner.run

    def at_run(self, *args, **kwargs):
        if not getattr(_COMPILE_ONLY, "on", False):
            return orig_at(self, *args, **kwargs)
        pool = getattr(_COMPILE_ONLY, "pool", None)
        for config in getattr(self, "configs", []):
            kw = {**kwargs, **config.all_kwargs()}
            call = (lambda kw=kw: _compile_only(lambda: self.fn.run(*args, **kw)))
            if pool is not None:
                fut = pool.submit(_quiet, call, getattr(_COMPILE_ONLY, "sink", None))
                getattr(_COMPILE_ONLY, "futures", []).append(fut)
            else:
                _quiet(call, None)
        return None
    Autotuner.run = at_run
    _PATCHED.append(("autotune", orig_at))
    return True


def _quiet(call: Callable[[], Any], sink: list | None) -> None:
    try:
        call()
    except Exception as exc:   # a config that does not compile here is compiled (and fails) where it runs
        if sink is not None:
            sink.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


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
        self.warm_errors: list[str] = []
        self.stats = {"submitted": 0, "compiled": 0, "failed": 0, "waited_s": 0.0, "first_error": "",
                      "autotune_warm_s": 0.0}

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

    def warm_autotuners(self, task_path: str) -> None:
        """Compile every config of the autotuners the task's ``launch`` reaches, on the pool, and wait for them (at
        most ``PRECOMPILE_WAIT_S``): the job's recorded first call then autotunes from the cache."""
        t0 = time.monotonic()
        queued: list = []

        def walk() -> str:
            _COMPILE_ONLY.pool, _COMPILE_ONLY.sink, _COMPILE_ONLY.futures = self.pool, self.warm_errors, queued
            try:
                return self._launch(task_path, "pre_initial", None)
            finally:
                _COMPILE_ONLY.pool = _COMPILE_ONLY.sink = _COMPILE_ONLY.futures = None
        try:
            err = self.pool.submit(walk).result(timeout=PRECOMPILE_WAIT_S)
            if err:
                self.warm_errors.append(err)
            for fut in list(queued):
                fut.result(timeout=max(0.1, PRECOMPILE_WAIT_S - (time.monotonic() - t0)))
        except Exception as exc:   # a timeout: the recorded call compiles what is left
            self.warm_errors.append(f"{type(exc).__name__}")
        self.stats["autotune_warm_s"] = round(time.monotonic() - t0, 2)
        self.stats["autotune_configs"] = len(queued)

    def submit(self, cfgs: list[dict[str, int]]) -> None:
        for cfg in cfgs:
            key = tuple(sorted(cfg.items()))
            if key in self.futures:
                continue
            self.futures[key] = self.pool.submit(self._one, dict(cfg))
            self.stats["submitted"] += 1

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
        return {**self.stats, "waited_s": round(self.stats["waited_s"], 2),
                "autotune_warm_errors": self.warm_errors[:3]}
