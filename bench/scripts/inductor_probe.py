"""Device probe: what torch.compile emits for a task's reference, and how it times beside the task's own kernel.

Usage (on the GPU host, after ``source bench/scripts/device_env.sh``):
    python3 bench/scripts/inductor_probe.py OUT_DIR TASK.py[:OPTIMIZED.py] ...

For each task: the reference compiled by Inductor (default settings, as the batch's torch.compile baseline), its
generated module (``torch._inductor.utils.run_and_get_code``) and the configs its autotuner kept (``*.best_config``
in a fresh ``TORCHINDUCTOR_CACHE_DIR``), written under OUT_DIR/<task>/; and one line per task with the launcher and
the compiled reference (and the optimized task, if given) timed side by side by ``triton.testing.do_bench`` (L2 flushed), median of 5 alternations.
Reading material for the tuner's space, not a benchmark figure.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="ind-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    import torch
    import triton
    from torch._inductor.utils import run_and_get_code

    lines = []
    for arg in sys.argv[2:]:
        path, _, opt_path = arg.partition(":")
        name = Path(path).stem
        d = out / name
        d.mkdir(exist_ok=True)
        try:
            spec = importlib.util.spec_from_file_location(f"probe_{name}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            inputs = mod.make_inputs(mod.BENCH_SHAPES[0], mod.DTYPES[0], 0, "cuda")
            torch._dynamo.reset()
            before = set(glob.glob(f"{cache}/**/*.best_config", recursive=True))
            compiled = torch.compile(mod.reference)
            _, codes = run_and_get_code(compiled, *inputs)
            for i, code in enumerate(codes):
                (d / f"inductor_{i}.py").write_text(code)
            for f in sorted(set(glob.glob(f"{cache}/**/*.best_config", recursive=True)) - before):
                shutil.copy(f, d / Path(f).name)
            fns = {"launch": mod.launch, "compile": compiled}
            if opt_path:
                spec = importlib.util.spec_from_file_location(f"probe_opt_{name}", opt_path)
                opt = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(opt)
                fns["optimized"] = opt.launch
            times = {k: [] for k in fns}
            for _ in range(5):
                for k, fn in fns.items():
                    times[k].append(triton.testing.do_bench(lambda fn=fn: fn(*inputs), return_mode="median"))
            line = {"task": name, **{f"{k}_us": round(sorted(v)[2] * 1e3, 2) for k, v in times.items()}}
        except Exception as exc:  # one task's failure is reported, the rest go on
            line = {"task": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(json.dumps(line), flush=True)
        lines.append(line)
    (out / "timings.json").write_text(json.dumps(lines, indent=1))


if __name__ == "__main__":
    main()
