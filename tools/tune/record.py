"""Every kernel launch of a call, found by running it (inside a sandboxed job only: task code runs here).

``recording()`` wraps ``JITFunction.run`` (and the interpreter's ``InterpretedFunction.run``): the path every
``kernel[grid](...)``, autotuner, heuristics wrapper, helper, closure or ``autograd.Function.apply`` takes to a
launch. Each launch is recorded with the ``@triton.jit`` function's name and file, its grid (a grid callable is
evaluated on the bound arguments, as Triton does), every constexpr and option value, how often it ran and, on a
GPU, its device time (CUDA events around the launch, in stream order, behind a short spin that covers the
host's launch path).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

from pydantic import BaseModel, Field

OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: a spin of about 0.2 ms (at 1.6-2 GHz) enqueued before each recorded launch's start event, longer than Triton's host
#: launch path (tens of us). Without it an idle device records that path as the kernel's time: on the H100 corpus
#: batch_s (2026-12-07) flaggems_max's two kernels were recorded at 135.6 and 81.2 us (a 37% share for a one-program
#: second stage) where the whole call takes 36.3 us
HOST_COVER_CYCLES = 400_000


class LaunchRecord(BaseModel):
    kernel: str                       # the @triton.jit function's name
    file: str = ""                    # the file that defines it
    grid: list[int] = Field(default_factory=list)
    constexprs: dict[str, Any] = Field(default_factory=dict)   # name -> value (ints, bools, floats, strings)
    options: dict[str, int] = Field(default_factory=dict)      # num_warps / num_stages where passed
    calls: int = 0
    device_ms: float = 0.0            # summed over calls (GPU only)
    share: float = 0.0                # of the recorded launches' device time (GPU), else of the calls

    @property
    def programs(self) -> int:
        n = 1
        for g in self.grid:
            n *= max(int(g), 1)
        return n


def _constexpr_params(fn: Any) -> list[str]:
    py = getattr(fn, "fn", fn)
    out = []
    for p in inspect.signature(py).parameters.values():
        ann = p.annotation
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        if "constexpr" in str(text):
            out.append(p.name)
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)[:60]


class _Recorder:
    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.by_key: dict[tuple, LaunchRecord] = {}
        self.pending: list[tuple[LaunchRecord, Any, Any]] = []

    def note(self, fn: Any, args: tuple, kwargs: dict, grid: Any):
        py = getattr(fn, "fn", fn)
        sig = inspect.signature(py)
        call_kw = {k: v for k, v in kwargs.items() if k in sig.parameters}
        try:
            bound = sig.bind_partial(*args, **call_kw)
            bound.apply_defaults()
            values = dict(bound.arguments)
        except TypeError:
            values = dict(call_kw)
        consts = {p: _plain(values[p]) for p in _constexpr_params(fn) if p in values}
        try:
            g = grid(dict(values, **{k: v for k, v in kwargs.items() if k not in values})) if callable(grid) else grid
            g = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
        except Exception:
            g = []
        opts = {k: int(kwargs[k]) for k in OPTION_NAMES if isinstance(kwargs.get(k), int)}
        key = (py.__name__, getattr(py, "__code__", None) and py.__code__.co_filename, tuple(g),
               tuple(sorted(consts.items(), key=lambda kv: kv[0])), tuple(sorted(opts.items())))
        rec = self.by_key.get(key)
        if rec is None:
            rec = self.by_key[key] = LaunchRecord(kernel=py.__name__, file=py.__code__.co_filename, grid=g,
                                                  constexprs=consts, options=opts)
        rec.calls += 1
        return rec

    def finish(self) -> list[LaunchRecord]:
        if self.cuda:
            import torch
            torch.cuda.synchronize()
            for rec, start, end in self.pending:
                rec.device_ms += start.elapsed_time(end)
        recs = list(self.by_key.values())
        total = sum(r.device_ms for r in recs) if self.cuda else 0.0
        calls = sum(r.calls for r in recs)
        for r in recs:
            r.device_ms = round(r.device_ms, 4)
            r.share = round(r.device_ms / total if total > 0 else r.calls / max(calls, 1), 4)
        return sorted(recs, key=lambda r: -r.share)


@contextlib.contextmanager
def recording(cuda: bool = False):
    """Records the launches made inside the block: ``with recording() as rec: ...; rec.launches``."""
    from triton.runtime.jit import JITFunction
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # another Triton: the compiled path only
        pass
    rec = _Recorder(cuda)
    saved = {c: c.__dict__["run"] for c in classes if "run" in c.__dict__}

    def wrap(orig):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            r = rec.note(self, args, kwargs, grid)
            if not cuda:
                return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            import torch
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(HOST_COVER_CYCLES)   # the device busy while Triton's host path launches: the events
            start.record()                         # then time the kernel, not that path
            out = orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            end.record()
            rec.pending.append((r, start, end))
            return out
        return run

    for c, orig in saved.items():
        c.run = wrap(orig)
    box = _Box()
    try:
        yield box
    finally:
        for c, orig in saved.items():
            c.run = orig
        box.launches = rec.finish()


class _Box:
    launches: list[LaunchRecord] = []
