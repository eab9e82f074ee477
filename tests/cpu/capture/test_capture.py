"""`tritondx capture` on a two-kernel program: what is recorded, ranked and written (oracle-mode tasks)."""

from __future__ import annotations

import json

import pytest
import torch

from tritondx.tools.intake.capture import parse_share, select
from tritondx.tools.intake.errors import CaptureError
from tritondx.tools.intake.oracle import derive_tolerance, is_reduction, make_group_inputs, make_tensor
from tritondx.tools.task.spec import load_task
from tritondx.tools.task.module import load_module


def test_two_kernels_give_two_tasks(captured):
    out, r = captured
    tasks = sorted(p.name for p in out.glob("*.py"))
    assert tasks == ["row_sum_kernel.py", "scale_add_kernel.py"]
    summary = json.loads((out / "capture.json").read_text())
    by = {k["kernel"]: k for k in summary["kernels"]}
    # main.py runs three steps over two distinct shapes: 3 launches, 2 signatures per kernel
    assert by["scale_add_kernel"]["launches"] == 3 and by["scale_add_kernel"]["signatures"] == 2
    assert by["row_sum_kernel"]["launches"] == 3 and by["row_sum_kernel"]["signatures"] == 2
    assert summary["timing"] == "wall"                        # the interpreter: wall time, said so
    assert "not GPU time" in summary["timing_label"] and "not GPU time" in r.stdout
    assert abs(sum(k["share"] for k in summary["kernels"]) - 1) < 1e-6
    # the launcher call site: the frame in the user's module that launched the kernel
    site = next(iter(by["scale_add_kernel"]["sites"]))
    assert site.endswith(":scale_add") and "mykernels.py:" in site
    for p in out.glob("*.py"):
        load_task(p)                                          # the existing task format, statically


def test_task_reproduces_the_captured_signatures(captured):
    out, _ = captured
    mod = load_module(str(out / "scale_add_kernel.py"), "t")
    # two signatures -> two shapes (keyed by the largest tensor), smallest first for the CPU checks
    assert mod.CHECK_SHAPES == [(1000,), (4097,)]
    assert set(mod.GROUPS) == {(1000,), (4097,)}
    # scalars keep their captured values; the grid is an expression of the inputs and the constexpr
    src = (out / "scale_add_kernel.py").read_text()
    assert "alpha = 0.5" in src and "grid = (triton.cdiv(n_elements, BLOCK),)" in src
    assert mod.ORACLE["written"] == ["out_ptr"] and mod.ORACLE["helpers"][0]["name"] == "_scale"
    rows = load_module(str(out / "row_sum_kernel.py"), "r")
    assert "stride_row = x_ptr.stride(0)" in (out / "row_sum_kernel.py").read_text()
    assert rows.ORACLE["reduction"] and rows.ORACLE["reduction_length"] == 100
    # the reduction's tolerance is wider than the elementwise one
    assert rows.TOLERANCE[torch.float32]["rtol"] > mod.TOLERANCE[torch.float32]["rtol"]


def test_oracle_reference_is_the_original_kernel_copy_when_the_module_is_not_importable(captured, run_interpreted,
                                                                                       tmp_path):
    out, _ = captured
    code = f"""
import torch
from tritondx.tools.task.module import load_module
mod = load_module({str(out / "row_sum_kernel.py")!r}, "o")
x = mod.make_inputs((5, 77), torch.float32, 3, "cpu")
print(mod._ORIGINAL is mod.row_sum_kernel, torch.equal(mod.launch(*x), mod.reference(*x)),
      torch.allclose(mod.launch(*x), x[0].sum(1), atol=1e-4))
"""
    # `mykernels` is not importable from here: the task's own (unchanged) copy is the oracle
    assert run_interpreted(code, tmp_path).split() == ["True", "True", "True"]


def test_derived_tolerance_grows_with_the_reduction_length():
    e = derive_tolerance(torch.float32, None)
    r1, r2 = derive_tolerance(torch.float32, 1024), derive_tolerance(torch.float32, 4 * 1024)
    assert e["rtol"] == 1e-5 and r1["rtol"] > e["rtol"]
    # ~sqrt(K): four times the length, about twice the added term
    assert abs((r2["rtol"] - e["rtol"]) / (r1["rtol"] - e["rtol"]) - 2) < 0.05
    assert derive_tolerance(torch.bfloat16, None)["rtol"] > derive_tolerance(torch.float16, None)["rtol"]
    assert derive_tolerance(torch.int32, 100) == {"atol": 0.0, "rtol": 0.0}
    assert is_reduction("acc += tl.sum(x, axis=0)") and not is_reduction("tl.store(p, x + y)")


def test_inputs_keep_strides_and_index_ranges():
    g = torch.Generator().manual_seed(0)
    t = make_tensor({"shape": [4, 6], "stride": [1, 4], "offset": 0, "dtype": "float32"}, torch.float32, g, "cpu")
    assert t.stride() == (1, 4) and not t.is_contiguous()
    s = make_tensor({"shape": [3, 5], "stride": [8, 1], "offset": 2, "dtype": "float32"}, torch.float32, g, "cpu")
    assert s.stride() == (8, 1) and s.storage_offset() == 2
    idx = make_tensor({"shape": [4000], "stride": [1], "dtype": "int64", "min": -100, "max": 49,
                       "sentinels": [-100], "nonneg_min": 0}, torch.int64, g, "cpu")
    assert set(idx[idx < 0].tolist()) == {-100} and int(idx.max()) <= 49 and (idx >= 0).float().mean() > 0.8
    few = make_tensor({"shape": [100], "stride": [1], "dtype": "int32", "min": 3, "max": 9, "values": [3, 9]},
                      torch.int32, g, "cpu")
    assert set(few.tolist()) <= {3, 9}
    pos = make_tensor({"shape": [1000], "stride": [1], "dtype": "float32", "min": 0.5, "max": 2.0, "mean": 1.0,
                       "std": 0.3}, torch.float32, g, "cpu")
    assert float(pos.min()) >= 0.5 and float(pos.max()) <= 2.0
    group = {"primary": "float32", "inputs": [{"shape": [2], "stride": [1], "dtype": "float32"},
                                              {"shape": [2], "stride": [1], "dtype": "int64", "min": 0, "max": 1},
                                              {"value": 7}]}
    a, b, c = make_group_inputs(group, torch.float16, 1, "cpu")
    assert a.dtype == torch.float16 and b.dtype == torch.int64 and c == 7


def test_selection_and_bad_input():
    class S:
        def __init__(self, share):
            self.share = share
    ranked = [S(0.6), S(0.3), S(0.01)]
    assert len(select(ranked, top=None, min_share=parse_share("2%"))) == 2
    assert len(select(ranked, top=1, min_share=None)) == 1
    with pytest.raises(CaptureError):
        parse_share("lots")


def test_a_program_without_kernels_is_one_line(tmp_path, tdx):
    (tmp_path / "plain.py").write_text("print('no kernels here')\n")
    r = tdx("capture", "--out", str(tmp_path / "o"), "--", "python", "plain.py", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("tritondx: error: ") and "no Triton kernel" in r.stderr
    assert not list((tmp_path / "o").glob("*.py"))
    r = tdx("capture", "--out", str(tmp_path / "o2"), cwd=tmp_path)
    assert r.returncode == 2 and "no command" in r.stderr
