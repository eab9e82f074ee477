"""The probe's autotuner picks reach every later job of the task: the probe (the trusted layer's only writer) times an
autotuned original's configs at every timed shape, and a job reading the layer takes the picks without timing a
config (needs a GPU; ``gpu``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TASK = '''
import torch, triton, triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (2, 4)],
                 key=["n"])
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2.0, mask=i < n)

def launch(x):
    out = torch.empty_like(x)
    k[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel())
    return out

def reference(x):
    return x * 2.0

def make_inputs(shape, dtype, seed, device):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype),)

CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
'''

READER = '''
import importlib.util, json, sys
import torch
from triton.runtime.autotuner import Autotuner
timed = []
orig = Autotuner._bench
Autotuner._bench = lambda self, *a, **kw: (timed.append(1), orig(self, *a, **kw))[1]
spec = importlib.util.spec_from_file_location("task", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
mod.launch(*mod.make_inputs(tuple(json.loads(sys.argv[2])), torch.float32, 1234, "cuda"))
torch.cuda.synchronize()
print(json.dumps({"timed": len(timed)}))
'''


def _read(tmp_path, task, shape, env):
    script = tmp_path / "reader.py"
    script.write_text(READER)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    p = subprocess.run([sys.executable, str(script), str(task), json.dumps(shape)], capture_output=True, text=True,
                       env={**base, **env, "TRITON_CACHE_DIR": str(tmp_path / f"private{len(shape)}{shape[0]}")},
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])["timed"]


def test_a_reader_of_the_trusted_layer_takes_the_probes_autotuner_picks(tmp_path, monkeypatch):
    from tritondx.tools.backends.cuda.backend import CudaBackend
    from tritondx.tools.exec import triton_cache
    from tritondx.tools.task.probe_job import probe_task
    if not triton_cache.enabled():
        pytest.skip("the sandbox here does not make the file system read-only: no trusted layer")
    monkeypatch.setenv("TRITONDX_CACHE", str(tmp_path / "cache"))
    task = tmp_path / "auto_task.py"
    task.write_text(TASK)
    res = probe_task(str(task), CudaBackend())
    assert res["tuned_ahead"] == ["(1048576,) float32"]
    layer = triton_cache.trusted_dir(TASK)
    assert list(layer.rglob("*.autotune.json"))
    env = triton_cache.reader_env(TASK)
    assert _read(tmp_path, task, [1 << 20], env) == 0      # the timed shape: the probe's pick, no config timed
    assert _read(tmp_path, task, [1000], env) == 0         # the checked shape the probe ran
    assert _read(tmp_path, task, [12345], env) == 4        # a shape the probe never ran: its configs are timed
