"""Autotuned candidates under the interpreter: every configuration is run in turn (tools/task/module.py).

The interpreter has no active driver, so Triton's autotuner cannot time its configurations (it raised
``RuntimeError: 0 active drivers``). The worker now makes each call run the next configuration, so the
verifier's calls check them one after another: a candidate whose second configuration is wrong fails.
"""

from __future__ import annotations

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.verification import verify_candidate

TASK = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=4),
                          triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.5 * x + y + WRONG, mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, y, out, n)
    return out


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),
            torch.randn(shape, generator=g).to(device=device, dtype=dtype))


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
'''


def _verify(tmp_path, wrong: str):
    task = tmp_path / "task.py"
    task.write_text(TASK.replace("WRONG", "0.0"))
    cand = tmp_path / "cand.py"
    cand.write_text(TASK.replace("WRONG", wrong))
    return verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"))


def test_autotuned_candidate_passes(tmp_path):
    r = _verify(tmp_path, "0.0")
    assert r.passed, f"{r.klass}: {r.reason}"


def test_every_configuration_is_checked(tmp_path):
    # only the second configuration (BLOCK 512) is wrong: the first call runs the first one, a later one the second
    r = _verify(tmp_path, "(BLOCK == 512) * 1.0")
    assert not r.passed and r.klass == "mismatch", f"{r.klass}: {r.reason}"
