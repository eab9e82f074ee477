"""GPU: the tune job times configurations of a real kernel on the device (run: pytest tests/gpu -m gpu). What it
checks is the mechanism (launches recorded with device-time shares, configurations timed, the final interleaved
round, the outputs of the timed calls compared), not a speed: speed is a benchmark figure."""

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TASK = '''
import torch
import triton
import triton.language as tl

DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
CHECK_SHAPES = [(5000,)]
BENCH_SHAPES = [(1 << 24,)]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


@triton.jit
def neg(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=m), mask=m)


def launch(x):
    out = torch.empty_like(x)
    BLOCK = 64
    neg[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK, num_warps=1)
    return out


def reference(x):
    return -x
'''


def test_the_tune_job_times_configurations_on_the_device(tmp_path):
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.tune.run import tune_task
    task = tmp_path / "neg.py"
    task.write_text(textwrap.dedent(TASK))
    res = tune_task(str(task), tmp_path / "tune", get_backend("cuda"), budget_s=30)
    assert res.ran and res.timed, res.error
    assert res.launches[0]["kernel"] == "neg" and res.launches[0]["device_ms"] > 0 and res.launches[0]["share"] > 0.99
    timed = [t for t in res.trials if t["ms"] is not None]
    assert len(timed) >= 3 and any("neg.BLOCK" in t["config"] for t in timed)
    assert "initial" in res.final and all(v["timed_output"] == "equal" for v in res.final.values())
    for w in res.winners:   # each winner is a readable source, values written where they are defined
        assert "_tdx_knob" not in w.source and w.speedup > 1.0
    assert Path(tmp_path / "tune" / "tune.json").exists()
