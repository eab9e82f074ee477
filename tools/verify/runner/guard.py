"""Integrity guard around a candidate's launch (runs in the candidate's runner process, loaded by
path; also used by the probe of the user's own task). Everything it records is diagnostics of an
untrusted process: the judge may reject on it, never accept.

While a candidate's ``launch`` runs, the guard
- counts Triton kernel launches (JIT and interpreter paths) and the stream each one used;
- records every PyTorch operator called outside a Triton launch (TorchDispatchMode), so that a
  launcher computing its output with torch (directly, through the reference, or in a try/except
  fallback) is caught;
- poisons fresh allocations (``torch.empty`` and friends) with NaN or a sentinel, so that an
  output element nothing wrote cannot pass as correct;
- snapshots the timing functions and checks nothing replaced them;
- can run the candidate with every Triton launch given an empty grid (``watch(skip_kernels=True)``):
  an output that is still correct then was not computed by a Triton kernel.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Operators that allocate, view or fill memory: a launcher may use these freely.
ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "full", "full_like", "new_full", "ones", "ones_like", "fill_", "zero_", "fill",
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "select", "slice", "detach", "alias", "lift_fresh", "split", "split_with_sizes", "chunk",
    "unbind", "narrow", "flatten", "view_as", "expand_as", "_reshape_alias", "unfold", "diagonal",
    "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "stride", "size",
    "_local_scalar_dense", "item", "resize_", "set_", "is_nonzero", "numel", "dim",
}

_state = threading.local()


def _op_name(func) -> str:
    # e.g. aten.empty_like.default -> empty_like
    return func._schema.name.split("::")[-1] if hasattr(func, "_schema") else str(func)


# Aten operators that hand out uninitialized memory; their results are poisoned while a candidate runs.
_ALLOCATING_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


class _OpRecorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in torch._disable_dynamo, whose first call imports
        # torch._dynamo: ~2 s of every verification job. Nothing is compiled under this mode.
        return False

    def __init__(self, guard: "LaunchGuard", poison: bool = False):
        super().__init__()
        self.guard = guard
        self.poison = poison

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        in_triton = getattr(_state, "in_triton", False)
        name = _op_name(func)
        if not in_triton:
            self.guard.ops.append(name)
            if self.guard.sink is not None:
                self.guard.sink(name)
        grown_from = None
        if self.poison and not in_triton and name == "resize_" and args and isinstance(args[0], torch.Tensor):
            grown_from = args[0].untyped_storage().nbytes()
        out = func(*args, **(kwargs or {}))
        # Poisoning here, at the dispatcher, rather than by wrapping ``torch.empty`` in Python: every
        # allocation reaches the dispatcher, including one through a reference the candidate saved
        # at import (``_empty = torch.empty``), ``torch.ops.aten.empty`` or ``Tensor.new_empty_strided``.
        if self.poison and not in_triton:
            if name in _ALLOCATING_OPS and isinstance(out, torch.Tensor):
                _poison_(out)
            elif grown_from is not None:
                _poison_bytes_(args[0].untyped_storage(), grown_from)
        return out


def _poison_(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(torch.iinfo(t.dtype).max if t.dtype != torch.uint8 else 0xA5)
    return t


def _poison_bytes_(storage, start: int) -> None:
    """Fill bytes ``start:`` of a storage (the part a ``resize_`` just added) with 0xFF (NaN for floats)."""
    n = storage.nbytes() - start
    if n > 0:
        with torch.no_grad():
            torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage, start, (n,), (1,)).fill_(0xFF)


class _KernelsOffAbort(Exception):
    """A kernels-off run launched far more kernels than any launcher needs (e.g. a loop that waits
    for a kernel to change a flag): stop it; its outputs are then taken as not computed."""


#: At most this many launches in one kernels-off run.
KERNELS_OFF_MAX_LAUNCHES = 10_000


def timing_functions() -> dict:
    """What a timer relies on, by name: a candidate that replaces one of them is tampering."""
    import statistics

    import triton.testing
    fns = {
        "time.perf_counter": time.perf_counter,
        "time.time": time.time,
        "statistics.median": statistics.median,
        "triton.testing.do_bench": triton.testing.do_bench,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        # the bench's L2 flush: a no-op here leaves the inputs hot in L2 while the variant is timed
        "torch.Tensor.zero_": torch.Tensor.zero_,
        # the stream a launch uses: replacing these hides a side-stream launch from the guard
        "torch.cuda.current_stream": torch.cuda.current_stream,
        "torch.cuda.default_stream": torch.cuda.default_stream,
    }
    if torch.cuda.is_available():
        # Triton's launcher asks its driver for the stream; a replaced getter launches elsewhere.
        try:
            from triton.runtime import driver
            fns["triton driver get_current_stream"] = driver.active.get_current_stream
        except Exception:  # no active Triton driver (e.g. interpreter-only machine)
            pass
    return fns


class TimingSnapshot:
    """The timing functions as they are now (take it before any candidate is imported); ``tampered``
    names those replaced since, or given new code (``fn.__code__ = ...``, which also fools whoever
    captured the function object)."""

    def __init__(self) -> None:
        self.functions = timing_functions()
        self.code = {k: getattr(v, "__code__", None) for k, v in self.functions.items()}

    def tampered(self) -> list[str]:
        now = timing_functions()
        replaced = [k for k, v in self.functions.items() if now.get(k) is not v]
        recoded = [f"{k}.__code__" for k, v in self.functions.items()
                   if k not in replaced and getattr(v, "__code__", None) is not self.code.get(k)]
        return replaced + recoded


@dataclass
class LaunchGuard:
    """One guard per worker; ``watch()`` wraps each candidate call."""

    allowed_extra_ops: set[str] = field(default_factory=set)
    launches: int = 0
    side_stream_launches: int = 0
    ops: list[str] = field(default_factory=list)
    #: launches during which Python hooks ran inside the launch (kernel pre-run hooks, Triton launch
    #: hooks): code there runs with op recording off, so a candidate may not use them
    hooked_launches: int = 0
    #: the exception a Triton launch raised during the last watched call (compile or interpreter error)
    kernel_error: BaseException | None = None
    kernel_error_name: str = ""
    #: while true, every Triton launch runs with an empty grid (nothing but the kernel body is skipped)
    skip_kernels: bool = False
    #: per-launch choice while watching: launch i is skipped when ``skip_mask[i]`` (beyond the mask: ``skip_kernels``)
    skip_mask: tuple = ()
    skipped: int = 0
    #: true while a candidate call is watched
    watching: bool = False
    #: called with each recorded op name as it happens (the runner streams them to the judge, so
    #: that clearing ``ops`` afterwards hides nothing)
    sink: object = None
    _installed: bool = False
    _timing: TimingSnapshot | None = None
    _stream_fns: tuple = ()

    def install(self) -> None:
        """Wrap the Triton launch entry points (once per process)."""
        if self._installed:
            return
        guard = self
        from triton.runtime.jit import JITFunction
        classes = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:
            pass
        # The stream functions as they are now, before any candidate is imported: a candidate that
        # replaces ``torch.cuda.current_stream`` cannot make a side-stream launch look like a default one.
        self._stream_fns = (torch.cuda.is_available, torch.cuda.is_initialized, torch.cuda.current_stream,
                            torch.cuda.default_stream)
        try:
            from triton import knobs as _knobs
            hook_chains = [_knobs.runtime.launch_enter_hook, _knobs.runtime.launch_exit_hook]
        except (ImportError, AttributeError):
            hook_chains = []
        for cls in classes:
            original = cls.run

            def run(self, *args, _original=original, **kwargs):
                if kwargs.get("warmup"):
                    return _original(self, *args, **kwargs)
                index = guard.launches
                guard.launches += 1
                is_available, is_initialized, current_stream, default_stream = guard._stream_fns
                if is_available() and is_initialized():
                    if current_stream().cuda_stream != default_stream().cuda_stream:
                        guard.side_stream_launches += 1
                if getattr(self, "pre_run_hooks", None) or any(getattr(h, "calls", None) for h in hook_chains):
                    guard.hooked_launches += 1
                skip = guard.skip_mask[index] if index < len(guard.skip_mask) else guard.skip_kernels
                if skip:
                    if guard.launches > KERNELS_OFF_MAX_LAUNCHES:
                        raise _KernelsOffAbort()
                    guard.skipped += 1
                    # An empty grid: argument binding, hooks and host copies still happen, only the
                    # kernel body does not run (Triton's launcher skips a grid of zero programs).
                    kwargs["grid"] = (0,)
                prev = getattr(_state, "in_triton", False)
                _state.in_triton = True
                try:
                    return _original(self, *args, **kwargs)
                except Exception as exc:
                    if guard.kernel_error is None:
                        guard.kernel_error = exc
                        guard.kernel_error_name = getattr(self, "__name__", "") or getattr(
                            getattr(self, "fn", None), "__name__", "kernel")
                    raise
                finally:
                    _state.in_triton = prev

            cls.run = run
        self._timing = TimingSnapshot()
        self._installed = True

    def tampered(self) -> list[str]:
        return self._timing.tampered() if self._timing is not None else []

    @contextlib.contextmanager
    def watch(self, poison: bool = True, skip_kernels: bool = False, skip_mask: tuple = ()):
        """Count launches and record torch ops during one candidate call.

        ``poison``: fill fresh allocations with NaN / a sentinel (done by the op recorder, at the
        dispatcher). ``skip_kernels``: give every Triton launch an empty grid; ``skip_mask``: per
        launch (launch i skipped when ``skip_mask[i]``; launches beyond it follow ``skip_kernels``).
        """
        self.launches = 0
        self.skipped = 0
        self.skip_mask = tuple(skip_mask)
        self.side_stream_launches = 0
        self.hooked_launches = 0
        self.kernel_error = None
        self.kernel_error_name = ""
        self.ops = []
        self.skip_kernels = skip_kernels
        self.watching = True
        try:
            with _OpRecorder(self, poison=poison):
                yield self
        finally:
            self.watching = False
            self.skip_kernels = False
            self.skip_mask = ()

    def note(self, name: str) -> None:
        """Record an event that is not a dispatcher op (a host read)."""
        self.ops.append(name)
        if self.sink is not None:
            self.sink(name)

    def forbidden_ops(self) -> list[str]:
        return sorted({op for op in self.ops if op not in ALLOWED_OPS and op not in self.allowed_extra_ops})


def record_threads(guard: "LaunchGuard", started: list) -> None:
    """Run every Python thread started from now on under its own op recorder (the dispatch mode is
    thread-local) and note each start in ``started``: torch compute in a second thread is recorded
    like compute in the caller's. Install before importing candidate code."""
    import _thread

    names = [n for n in ("start_new_thread", "start_joinable_thread") if hasattr(_thread, n)]
    for name in names:
        original = getattr(_thread, name)

        def start(function, *args, _original=original, **kwargs):
            started.append(getattr(function, "__qualname__", "?"))

            def body(*a, **k):
                with _OpRecorder(guard, poison=False):
                    return function(*a, **k)
            return _original(body, *args, **kwargs)

        setattr(_thread, name, start)
        if hasattr(threading, "_" + name):
            setattr(threading, "_" + name, start)


#: Tensor methods that hand element data to the host outside the dispatcher (numpy, Python lists, DLPack)
HOST_READS = ("numpy", "tolist", "__array__", "__dlpack__")
HOST_READ_PREFIX = "host_read:"


def record_host_reads(guard: "LaunchGuard") -> None:
    """While a call is watched, note every host read of tensor data through ``torch.Tensor``'s
    methods (a launcher that computes with numpy or Python lists reads its inputs this way)."""
    for name in HOST_READS:
        original = getattr(torch.Tensor, name, None)
        if original is None:
            continue

        def read(self, *args, _original=original, _name=name, **kwargs):
            if guard.watching:
                guard.note(HOST_READ_PREFIX + _name)
            return _original(self, *args, **kwargs)

        setattr(torch.Tensor, name, read)
