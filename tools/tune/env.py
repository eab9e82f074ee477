"""What the tune job runs every configuration against (inside the sandboxed worker): the task's inputs and the
initial kernel's outputs, the instrumented module per configuration, the timer, a watchdog for hung
configurations."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import threading
import time
from typing import Any

import torch

from tritondx.tools.task.module import (as_tuple, bitwise_equal, load_module, norm_shape, to_dtype,
                                        tolerance_entries)
from tritondx.tools.tune import knob as knobmod

#: the device time one configuration's timed calls aim at
TIME_TARGET_MS = 10.0
#: a configuration's screen (its compile where none was done ahead, a call, the comparison) and its timing may take
#: this long (s); past it the job ends itself and ``run.tune_task`` runs it again without that configuration. On the
#: H200 corpus batch of 2026-12-05 one attention kernel's 512-row tile hung its job until the job's timeout
#: (195 s): the task's whole search bought 4 configurations in 240 s.
CONFIG_LIMIT_S = 45.0
HUNG_EXIT = 75


def outputs(x: Any) -> list[torch.Tensor]:
    return [t for t in as_tuple(x) if isinstance(t, torch.Tensor)]


def mismatch(outs: list[torch.Tensor], refs: list[torch.Tensor], tols: dict[int, tuple[float, float]]) -> str:
    from tritondx.tools.verify.judge.compare import compare
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, the initial kernel returns {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs)):
        atol, rtol = tols.get(i, tols.get(-1, (1e-5, 1e-5)))
        bad = compare(o, r, atol, rtol)
        if bad:
            return f"output {i}: {bad['reason']}"
    return ""


class Env:
    """What every configuration is run and checked against."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.cuda = job.get("device", "cpu").startswith("cuda")
        self.device = job.get("device", "cpu")
        self.orig = load_module(job["task"], "orig")
        self.inst_path = job["instrumented"]
        shapes = self.orig.BENCH_SHAPES if self.cuda else self.orig.CHECK_SHAPES
        self.shape = norm_shape(shapes[0])
        self.dtype = to_dtype(self.orig.DTYPES[0])
        self.inputs = as_tuple(self.orig.make_inputs(self.shape, self.dtype, 1, self.device))
        self.kept_inputs = Kept([x for x in self.inputs if isinstance(x, torch.Tensor)])
        self.kept_refs = Kept([])
        #: whether the initial kernel's call changes its inputs (``keep``): then a configuration's doing so is no fault
        self.inplace = False
        self.tols = tolerance_entries(self.orig, self.dtype)
        if self.cuda:
            from tritondx.tools.bench.bench import Timer
            self.timer = Timer(self.device, pad_host=True)
        self.mods: dict[tuple, Any] = {}

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def keep(self, refs: list[torch.Tensor]) -> None:
        """After the initial kernel's first call: copies of its outputs, whether it changed its inputs (an in-place
        task), and its inputs put back as they were made."""
        self.kept_refs = Kept(refs)
        self.inplace = self.kept_inputs.put_back()
        self.sync()

    def repair(self) -> bool:
        """Put back any input or reference output that changed since ``keep``; whether one had."""
        changed = self.kept_inputs.put_back()
        changed = self.kept_refs.put_back() or changed
        if changed:
            self.sync()
        return changed

    def poison(self, refs: list[torch.Tensor]) -> None:
        """Fill the allocator's free blocks of the outputs' sizes, so an output a configuration does not write
        holds no earlier answer."""
        for r in refs:
            junk = torch.full((max(r.numel() * r.element_size(), 1),), 0x7F, dtype=torch.uint8, device=r.device)
            del junk

    def module(self, cfg: dict[str, tuple[str, int]]):
        key = tuple(sorted(cfg.items()))
        if key not in self.mods:
            knobmod.CURRENT = dict(cfg)
            self.mods[key] = load_module(self.inst_path, "tune")
        return self.mods[key]

    def call(self, mod, cfg: dict[str, tuple[str, int]]):
        knobmod.CURRENT = dict(cfg)
        return mod.launch(*self.inputs)

    def time_held(self, fn, est_ms: float | None = None, most: int = 100) -> float:
        """The median device time of ``fn``'s calls (at most ``most``), inside an exclusive hold the caller already
        has."""
        if est_ms is None:
            est_ms = statistics.median(self.timer.calls(fn, 3))
        n = max(5, min(most, int(TIME_TARGET_MS / max(est_ms, 1e-3))))
        return statistics.median(self.timer.calls(fn, n))


class Kept:
    """Copies of tensors (on their device) to find and undo writes a configuration made outside its outputs: a tile
    past a tensor's end without a mask writes into whatever lies there, and what lay there was often the task's
    inputs. H100 corpus batch_q of 2026-12-06: a ``BLOCK_MODEL`` wider than lightning_attn2's head dimension wrote
    into ``q``; every later configuration, and the initial kernel in the final timing, then differed from the
    reference on one row, and the task kept 1.00x where batch_p had found 1.07x."""

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        self.pairs = [(t, t.detach().clone()) for t in tensors]

    def put_back(self) -> bool:
        """Whether any tensor differs bit for bit from its copy; each that does is restored."""
        changed = False
        for t, copy in self.pairs:
            if not bitwise_equal(t, copy):
                changed = True
                with contextlib.suppress(RuntimeError):   # an expanded view cannot be written element by element
                    t.detach().copy_(copy)
        return changed


#: the note of a configuration whose call changed the task's inputs or the reference outputs
WROTE_OUTSIDE = "it wrote outside its outputs (the task's inputs or the initial kernel's outputs changed; put back)"


def run_checked(env: Env, fn, refs: list[torch.Tensor]) -> str:
    """``fn``'s outputs compared with ``refs`` (empty where equal). Inputs and reference outputs are put back as
    kept before the call; one the call itself changes fails it (a write outside its outputs), unless the initial
    kernel changes its inputs too (an in-place task: its inputs are put back after every call)."""
    env.repair()
    env.poison(refs)
    outs = outputs(fn())
    env.sync()
    bad = mismatch(outs, refs, env.tols)
    if env.repair() and not env.inplace:
        return WROTE_OUTSIDE + (f"; {bad}" if bad else "")
    return bad


def as_knobs(cfg: dict[str, int], how: dict[str, str], pins: dict[str, int] | None = None
              ) -> dict[str, tuple[str, int]]:
    """``knob.CURRENT`` for ``cfg``: an autotuned hot kernel's values not in it at the autotuner's pick (``pins``)."""
    out = {k: ("set", v) for k, v in (pins or {}).items()}
    out.update({k: (how[k], int(v)) for k, v in cfg.items()})
    return out


def fresh(x: Any) -> Any:
    """A fresh copy of a tensor input (a launcher that writes an input in place leaves the next call its answer)."""
    return x.clone() if isinstance(x, torch.Tensor) else x


def own_seconds() -> float:
    """A clock of the job's own work: wall time less the seconds it waited for the device lock."""
    return time.monotonic() - usage()["wait_s"]


@contextlib.contextmanager
def watch(what: str, limit_s: float):
    """End the process (exit ``HUNG_EXIT``) when the block runs longer than ``limit_s``: a kernel that hangs or
    runs for minutes holds the device and the task; the progress file names the configuration that was running."""
    def fire() -> None:
        sys.stderr.write(f"tune: {what} ran over {limit_s:.0f} s (a hang or a runaway kernel): the job ends and is "
                         "run again without it\n")
        sys.stderr.flush()
        os._exit(HUNG_EXIT)
    t = threading.Timer(limit_s, fire)
    t.daemon = True
    t.start()
    try:
        yield
    finally:
        t.cancel()


def label(cfg: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items())) or "as launched"


def usage() -> dict[str, float]:
    from tritondx.tools.exec.gpulock import usage
    return usage()
