"""Job ``launch``: run a task's launcher on its first bench shape (for external profilers such as ncu)."""

from __future__ import annotations

from typing import Any

from tritondx.tools.exec.gpulock import phase
from tritondx.tools.task.module import as_tuple, load_module, norm_shape, to_dtype


def run_launch(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    mod = load_module(job["task"], "launch")
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
        inputs = as_tuple(mod.make_inputs(shape, dtype, 1, job["device"]))
        repeat = int(job.get("repeat", 1))
        for i in range(repeat):
            if last and i == repeat - 1:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            mod.launch(*inputs)
        if cuda:
            torch.cuda.synchronize()
        if last:
            torch.cuda.profiler.stop()
    return {"ok": True, "shape": list(shape) if isinstance(shape, tuple) else shape}
