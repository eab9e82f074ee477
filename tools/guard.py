"""Integrity guard around a candidate's launch (runs inside the sandboxed worker).

While a candidate's ``launch`` runs, the guard
- counts Triton kernel launches (JIT and interpreter paths) and the stream each one used;
- records every PyTorch operator called outside a Triton launch (TorchDispatchMode), so that a
  launcher computing its output with torch (directly, through the reference, or in a try/except
  fallback) is caught;
- poisons fresh allocations (``torch.empty`` and friends) with NaN or a sentinel, so that an
  output element nothing wrote cannot pass as correct;
- snapshots the timing functions and checks nothing replaced them.
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


class _OpRecorder(TorchDispatchMode):
    def __init__(self, guard: "LaunchGuard"):
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not getattr(_state, "in_triton", False):
            self.guard.ops.append(_op_name(func))
        return func(*args, **(kwargs or {}))


def _poison_(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(torch.iinfo(t.dtype).max if t.dtype != torch.uint8 else 0xA5)
    return t


@dataclass
class LaunchGuard:
    """One guard per worker; ``watch()`` wraps each candidate call."""

    allowed_extra_ops: set[str] = field(default_factory=set)
    launches: int = 0
    side_stream_launches: int = 0
    ops: list[str] = field(default_factory=list)
    _installed: bool = False
    _timing_snapshot: dict = field(default_factory=dict)

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
        for cls in classes:
            original = cls.run

            def run(self, *args, _original=original, **kwargs):
                if kwargs.get("warmup"):
                    return _original(self, *args, **kwargs)
                guard.launches += 1
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    if torch.cuda.current_stream().cuda_stream != torch.cuda.default_stream().cuda_stream:
                        guard.side_stream_launches += 1
                prev = getattr(_state, "in_triton", False)
                _state.in_triton = True
                try:
                    return _original(self, *args, **kwargs)
                finally:
                    _state.in_triton = prev

            cls.run = run
        self._timing_snapshot = self.timing_functions()
        self._installed = True

    @staticmethod
    def timing_functions() -> dict:
        import triton.testing
        fns = {
            "time.perf_counter": time.perf_counter,
            "time.time": time.time,
            "triton.testing.do_bench": triton.testing.do_bench,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        }
        return fns

    def tampered(self) -> list[str]:
        now = self.timing_functions()
        return [k for k, v in self._timing_snapshot.items() if now.get(k) is not v]

    @contextlib.contextmanager
    def watch(self, poison: bool = True):
        """Count launches and record torch ops during one candidate call."""
        self.launches = 0
        self.side_stream_launches = 0
        self.ops = []
        patches = []
        if poison:
            for name in ("empty", "empty_like", "empty_strided"):
                original = getattr(torch, name)

                def poisoned(*args, _original=original, **kwargs):
                    return _poison_(_original(*args, **kwargs))

                patches.append((torch, name, original))
                setattr(torch, name, poisoned)
            original_new_empty = torch.Tensor.new_empty

            def new_empty(self, *args, **kwargs):
                return _poison_(original_new_empty(self, *args, **kwargs))

            patches.append((torch.Tensor, "new_empty", original_new_empty))
            torch.Tensor.new_empty = new_empty
        try:
            with _OpRecorder(self):
                yield self
        finally:
            for obj, name, original in patches:
                setattr(obj, name, original)

    def forbidden_ops(self) -> list[str]:
        return sorted({op for op in self.ops if op not in ALLOWED_OPS and op not in self.allowed_extra_ops})
