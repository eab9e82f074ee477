"""A split count: a constexpr that only divides work among programs (``share = tl.cdiv(N, SPLIT)``, the grid's
``META["SPLIT"]`` programs on that axis) is a grid knob. Launched at one program per element (a LoRA expand kernel
does this), it is tuned to fewer programs with larger shares, always a divisor of the launched count
(``knob.split``) so that the shares still tile the work at every shape; a split the grid does not follow, and a
tile that is a tensor's dimension as it stands, are left alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.tune import space as spacemod
from tritondx.tools.tune.knob import split
from tritondx.tools.tune.run import tune_task
from tritondx.tools.tune.search import domains
from tritondx.tools.tune.tunables import kernel_roles
from tdx_interp import run_interpreted

TASK = '''
import torch
import triton
import triton.language as tl

DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
CHECK_SHAPES = [(3, 100)]
BENCH_SHAPES = [(4, 256)]


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g).to(device=device, dtype=dtype),)


@triton.jit
def split_rows_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr, SPLIT: tl.constexpr):
    pid_s = tl.program_id(0)
    row = tl.program_id(1)
    share = tl.cdiv(N, SPLIT)
    offs = tl.arange(0, BLOCK)
    for n in range(0, share, BLOCK):
        cur = n + offs
        m = cur < share
        idx = pid_s * share + cur
        x = tl.load(x_ptr + row * N + idx, mask=m)
        tl.store(out_ptr + row * N + idx, 2.0 * x, mask=m)


def launch(x):
    out = torch.empty_like(x)
    grid = lambda META: (META["SPLIT"], x.shape[0])
    split_rows_kernel[grid](x, out, x.shape[1], BLOCK=16, SPLIT=x.shape[1])
    return out


def reference(x):
    return 2.0 * x
'''


def _kfn(src: str, name: str) -> cst.FunctionDef:
    return next(n for n in cst.parse_module(src).body if isinstance(n, cst.FunctionDef) and n.name.value == name)


def test_split_values_are_divisors_of_the_launched_count():
    assert split(4096, -6) == 64          # the benchmark's N: as asked
    assert split(100, -3) == 4            # 100 >> 3 = 12 does not divide 100; gcd(100, 12) = 4 does
    assert split(7, -1) == 1
    assert split(64, 0) == 64 and split(64, 2) == 64
    for n in range(1, 300):
        for k in range(-9, 1):
            assert n % split(n, k) == 0


def test_a_cdiv_divisor_is_a_split_knob_of_the_grid():
    src = textwrap.dedent(TASK)
    roles = kernel_roles(_kfn(src, "split_rows_kernel"))
    assert roles["SPLIT"] == "split" and roles["BLOCK"] == "tile"
    knob = spacemod.build(src).knob("split_rows_kernel.SPLIT")
    assert (knob.kind, knob.how, knob.grid_tied) == ("grid", "split", True)
    dom = next(d for d in domains([knob.model_dump()], {"split_rows_kernel.SPLIT": 4096}))
    assert dom.values == list(range(-10, 1)) and dom.first == -1     # fewer programs only, tried first
    # not followed by the grid: left alone
    fixed = src.replace('grid = lambda META: (META["SPLIT"], x.shape[0])', "grid = (x.shape[1], x.shape[0])")
    sp = spacemod.build(fixed)
    assert "split_rows_kernel.SPLIT" not in {k.key for k in sp.knobs}
    assert any(s.param == "split_rows_kernel.SPLIT" and "split count" in s.why for s in sp.skipped)


def test_a_tile_that_is_a_tensors_dimension_stays_untuned():
    src = textwrap.dedent(TASK).replace("BLOCK=16, SPLIT=x.shape[1]", "BLOCK=x.shape[1], SPLIT=x.shape[1]")
    sp = spacemod.build(src)
    assert "split_rows_kernel.BLOCK" not in {k.key for k in sp.knobs}
    assert any(s.param == "split_rows_kernel.BLOCK" for s in sp.skipped)


def test_the_emitted_split_is_readable_and_exact_at_a_shape_it_does_not_divide(tmp_path: Path):
    src = textwrap.dedent(TASK)
    out = spacemod.emit(src, {"split_rows_kernel.SPLIT": -3})
    assert "SPLIT=math.gcd(x.shape[1], max(x.shape[1] >> 3, 1))" in out and "\nimport math\n" in out
    assert spacemod.describe(spacemod.build(src), {"split_rows_kernel.SPLIT": -3},
                             {"split_rows_kernel.SPLIT": 256}) == "SPLIT 256->32"
    path = tmp_path / "emitted.py"
    path.write_text(out)
    code = (f"import torch, importlib.util as u\ns = u.spec_from_file_location('t', {str(path)!r})\n"
            "m = u.module_from_spec(s); s.loader.exec_module(m)\n"
            "for shape in [(3, 100), (2, 256), (1, 7)]:\n"
            "    x = torch.randn(shape)\n"
            "    torch.testing.assert_close(m.launch(x), 2.0 * x)\n")
    r = run_interpreted(code, timeout=300)   # the warm interpreter host (tests/cpu/tdx_interp.py)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_tune_job_screens_split_configurations_under_the_interpreter(tmp_path: Path):
    task = tmp_path / "split_task.py"
    task.write_text(textwrap.dedent(TASK))
    res = tune_task(str(task), tmp_path / "tune", get_backend("interpreter"), budget_s=60)
    assert res.ran and not res.timed
    splits = [t for t in res.trials if "split_rows_kernel.SPLIT" in t["config"]]
    assert splits and all(t["status"] == "ok" for t in splits)      # each one's outputs equal the launched kernel's
    assert {t["config"]["split_rows_kernel.SPLIT"] for t in splits} <= set(range(-10, 0))
