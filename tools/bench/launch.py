"""Job ``launch``: run a task's launcher on its first bench shape (for external profilers such as ncu)."""

from __future__ import annotations

import os
import stat
from typing import Any

from tritondx.tools.evidence.ncu import GATE_ENV
from tritondx.tools.exec.gpulock import phase
from tritondx.tools.task.module import as_tuple, load_module, norm_shape, to_dtype



def _gate() -> None:
    fds = os.environ.pop(GATE_ENV, "")
    if not fds:
        return
    ready, go = (int(x) for x in fds.split(","))
    # descriptors that did not reach this process (closed, or numbers a wrapper uses for something else) end the job
    # before any CUDA call: the orchestrator runs it once more without the gate
    if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (ready, go)):
        raise RuntimeError("the profiler's gate descriptors are not pipes")
    os.write(ready, b"r")
    os.close(ready)
    got = os.read(go, 1)
    os.close(go)
    if got != b"g":
        raise RuntimeError("the profiler's gate closed before the go")


def run_launch(job: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    t0 = time.monotonic()
    mod = load_module(job["task"], "launch")
    loaded = time.monotonic()
    _gate()   # the first CUDA call comes after this (make_inputs): under the profiler lock
    go = time.monotonic()
    steps: dict[str, float] = {"load_s": loaded - t0, "gate_wait_s": go - loaded}
    shape = norm_shape(job.get("shape") or mod.BENCH_SHAPES[0])
    dtype = to_dtype(mod.DTYPES[0])
    # Under ncu every launch is replayed once per metric pass: the device must be ours alone meanwhile
    # (the batch's lock; the orchestrator does not hold it across ncu's and Python's start-up).
    # ``profile_last``: only the last call is inside the CUDA profiler range (ncu with
    # ``--profile-from-start off``): the inputs' kernels, the first call's compiles and autotuning trials
    # are not profiled, so every replayed launch is one of the launcher's own, in its settled config.
    cuda = job["device"].startswith("cuda")
    last = bool(job.get("profile_last")) and cuda
    with phase("exclusive"):
        held = time.monotonic()
        steps["device_wait_s"] = held - go
        inputs = as_tuple(mod.make_inputs(shape, dtype, 1, job["device"]))
        if cuda:
            torch.cuda.synchronize()
        steps["inputs_s"] = time.monotonic() - held
        repeat = int(job.get("repeat", 1))
        for i in range(repeat):
            t = time.monotonic()
            if last and i == repeat - 1:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            mod.launch(*inputs)
            if cuda:
                torch.cuda.synchronize()
            # the first call compiles and autotunes (the profiled last call is replayed once per metric pass)
            steps["profiled_call_s" if last and i == repeat - 1 else f"call{i + 1}_s"] = time.monotonic() - t
        if last:
            torch.cuda.profiler.stop()
    # where the session's time went after the go (``ncu.NcuSession.steps``; the job's exit and ncu's own work after
    # it are the rest of the profiler lock's hold)
    return {"ok": True, "shape": list(shape) if isinstance(shape, tuple) else shape,
            "steps": {k: round(v, 3) for k, v in steps.items()}}
