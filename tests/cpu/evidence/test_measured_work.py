"""Measured work, not declared work: a GEMM task without ``flops()`` gets its FLOPs from its IR (tl.dot
shape x K-loop trip count x programs, at the launch's real arguments), and the roofline then classifies
it compute-bound at its shape; ncu's counted FLOPs and DRAM bytes are parsed and take precedence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tritondx.tools.evidence.ncu import measured_work, parse_raw_csv
from tritondx.tools.evidence.profiler import roofline_findings
from tritondx.tools.evidence.work import declared, ir_work, resolve, work_for_bench

ROOT = Path(__file__).resolve().parents[3]
FN_RE = re.compile(r"\ndef (flops|min_bytes)\(.*?(?=\n\n\n|\nCHECK_SHAPES)", re.S)


def _gemm_without_flops(tmp_path: Path) -> Path:
    src = (ROOT / "bench" / "suite" / "l3_matmul.py").read_text()
    stripped = FN_RE.sub("", src)
    assert "def flops" not in stripped and "def min_bytes" not in stripped and "tl.dot" in stripped
    path = tmp_path / "gemm_task.py"
    path.write_text(stripped)
    return path


def _bench(shape, bytes_, median_ms):
    # ceilings in the H200's range: 4 TB/s copy, ~700 TFLOP/s fp16 matmul
    return {"ceilings": {"copy_bytes_per_s": 4.0e12, "matmul_flops_per_s": {"bf16": 7.0e14, "tf32": 3.5e14}},
            "shapes": [{"shape": list(shape), "dtype": "torch.float16", "bytes": bytes_, "flops": 0,
                        "floor_ms": bytes_ / 4.0e12 * 1e3,
                        "variants": {"initial": {"median_ms": median_ms, "spread": 0.01,
                                                 "roofline_fraction": bytes_ / 4.0e12 * 1e3 / median_ms}}}]}


def test_gemm_flops_from_ir_make_it_compute_bound(tmp_path):
    task = _gemm_without_flops(tmp_path)
    assert declared(task.read_text()) == set()
    shape = (1024, 768, 512)
    work = ir_work(str(task), [shape])["[1024, 768, 512]"]
    M, N, K = shape
    assert work["flops"] == 2 * M * N * K, work  # 64x64x32 dots x (512/32) K-steps x 192 programs
    assert work["dots"] == 1 and work["launches"] == 1
    # loads: every program reads a 64x512 strip of A and a 512x64 strip of B (fp16); stores C once
    programs = (M // 64) * (N // 64)
    assert work["bytes"] == programs * (64 * 512 + 512 * 64) * 2 + M * N * 2
    io_bytes = (M * K + K * N + M * N) * 2
    # 4.1 us for 0.8 GFLOP: 196 TFLOP/s, far beyond what its 2.4 MB could explain at 4 TB/s (0.6 us)
    bench = _bench(shape, io_bytes, 0.0041)
    before = roofline_findings(bench)[0]
    assert before.metric["bound"] == "memory"   # today's default: no flops, "memory-bound at 14%"
    figures = work_for_bench(str(task), bench)
    after = roofline_findings(bench, "initial", figures)[0]
    assert after.metric["bound"] == "compute", after.message
    assert after.metric["flops"] == 2 * M * N * K and after.metric["flops_source"] == "IR-derived"
    assert "compute-bound" in after.message and "FLOPs IR-derived" in after.message
    assert after.metric["roofline_fraction"] == pytest.approx(2 * M * N * K / 7.0e14 / 0.0041e-3, rel=1e-3)
    assert "tl_dot" in after.suggests and "fuse_passes" not in after.suggests


def test_declared_figures_win_and_bytes_never_exceed_the_default():
    entry = {"shape": [8, 8], "bytes": 1000, "flops": 50}
    w = resolve(entry, {"flops", "min_bytes"}, {"flops": 999, "bytes": 10}, {"flops": 77, "dram_bytes": 5})
    assert (w.flops, w.flops_source, w.bytes, w.bytes_source) == (50, "declared", 1000, "declared")
    w = resolve(entry, set(), {"flops": 999, "bytes": 4000}, {"flops": 77, "dram_bytes": 5})
    assert (w.flops, w.flops_source) == (77, "ncu-measured") and w.bytes == 1000
    assert w.bytes_source.startswith("default") and w.ncu_dram_bytes == 5
    w = resolve(entry, set(), {"flops": 999, "bytes": 400})
    assert (w.flops, w.flops_source, w.bytes, w.bytes_source) == (999, "IR-derived", 400, "IR-derived")


NCU = '''"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","sm__sass_thread_inst_executed_op_fadd_pred_on.sum","sm__sass_thread_inst_executed_op_fmul_pred_on.sum","sm__ops_path_tensor_src_fp16_dst_fp32.sum"
"","","nsecond","byte","byte","inst","inst","inst",""
"0","matmul_kernel","1,000","2,000,000","500,000","10","3","2","805306368"
"1","matmul_kernel","1,000","2,000,000","500,000","10","3","2","805306368"
'''


def test_ncu_counts_flops_and_dram_bytes():
    rows = parse_raw_csv(NCU)
    assert rows[0]["dram_bytes"] == 2_500_000 and rows[0]["flops"] == 2 * 10 + 3 + 2 + 805306368
    w = measured_work(rows)   # one launcher call: the first launch of each kernel
    assert w == {"flops": 805306393, "dram_bytes": 2_500_000, "kernels": 1}


def test_ncu_figures_apply_to_the_launch_jobs_shape_only(tmp_path):
    from tritondx.tools.evidence.work import first_bench_shape
    task = _gemm_without_flops(tmp_path)
    shape = first_bench_shape(str(task))
    assert shape == (4096, 4096, 4096)
    bench = _bench(shape, 100, 1.0)
    bench["shapes"].append({**bench["shapes"][0], "shape": [64, 64, 64]})
    from unittest import mock
    with mock.patch("tritondx.tools.evidence.work.ir_work", return_value={}):
        figs = work_for_bench(str(task), bench, {"flops": 123, "dram_bytes": 456}, shape)
    assert figs["[4096, 4096, 4096]"].flops_source == "ncu-measured" and figs["[4096, 4096, 4096]"].flops == 123
    assert figs["[64, 64, 64]"].flops_source == "default" and figs["[64, 64, 64]"].ncu_dram_bytes is None


def test_a_wgmma_kernel_has_no_hardware_flop_count():
    """sm_90: the tensor-path op counters read 0 on warp-group MMA (seen on the H200 with ncu 2025.3, a
    2048^3 tl.dot GEMM: 0 FLOPs counted); a kernel that issues wgmma gets no ncu FLOPs (None, with a note),
    so the IR's count stands in the roofline instead of a hardware-looking 0."""
    head, units, row = NCU.splitlines()[:3]
    text = "\n".join([head + ',"sm__inst_executed_pipe_tensor_op_gmma.sum"', units + ',"inst"',
                      row.replace('"805306368"', '"0"') + ',"4,194,304"']) + "\n"
    rows = parse_raw_csv(text)
    assert "flops" not in rows[0] and rows[0]["wgmma_instructions"] == 4_194_304
    w = measured_work(rows)
    assert w["flops"] is None and "wgmma" in w["flops_note"] and w["dram_bytes"] == 2_500_000
    entry = {"shape": [2048, 2048, 2048], "bytes": 1000, "flops": 0}
    fig = resolve(entry, set(), {"flops": 2 * 2048 ** 3, "bytes": 400}, w)
    assert (fig.flops, fig.flops_source) == (2 * 2048 ** 3, "IR-derived")
