"""bench/capture/: the Llama-style step built from Liger-Kernel's kernels (step.py), its before/after bench
(bench_step.py) and the GPU script's whole flow (run_step_h200.sh) at the tiny size on a CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("liger_kernel")

ROOT = Path(__file__).resolve().parents[3]
CAP = ROOT / "bench" / "capture"


def _py(*args: str, interpret: bool, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1" if interpret else "0"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_step_runs_on_cpu_with_torch_fallbacks_and_liger_where_the_interpreter_can(tmp_path):
    r = _py(str(CAP / "step.py"), "--size", "tiny", "--steps", "1", interpret=False, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rope: torch" in r.stdout and "no GPU and no TRITON_INTERPRET=1" in r.stdout
    plain = [ln for ln in r.stdout.splitlines() if "step 0: loss" in ln][0].split()[3]
    r = _py(str(CAP / "step.py"), "--size", "tiny", "--steps", "1", interpret=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    # under the interpreter RoPE and the fused cross-entropy are Liger's; RMSNorm and SwiGLU cannot be (said why)
    assert "rope: liger_kernel, cross_entropy: liger_kernel" in r.stdout and "rms_norm: torch" in r.stdout
    assert "cannot run under the Triton interpreter" in r.stdout
    assert [ln for ln in r.stdout.splitlines() if "step 0: loss" in ln][0].split()[3] == plain   # same loss


def test_bench_compares_outputs_and_sees_a_wrong_patched_copy(tmp_path):
    import liger_kernel
    src = Path(liger_kernel.__file__).parent
    r = _py(str(CAP / "bench_step.py"), "alias", str(src), str(tmp_path / "alias"), "liger_kernel_patched",
            interpret=False, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    copy = tmp_path / "alias" / "liger_kernel_patched"
    flce = (copy / "ops" / "fused_linear_cross_entropy.py").read_text()
    assert "from liger_kernel_patched.ops.cross_entropy import" in flce and "from liger_kernel." not in flce
    # a "patch" that changes results: the rotated q of the forward pass is 1% off
    rope = copy / "ops" / "rope.py"
    line = "new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row\n"
    assert line in rope.read_text()
    wrong = "new_q_tile_1 = (q_tile_1 * cos_row - q_tile_2 * sin_row) * 1.01\n"
    rope.write_text(rope.read_text().replace(line, wrong, 1))
    r = _py(str(CAP / "bench_step.py"), "run", "--size", "tiny", "--after-path", str(tmp_path / "alias"),
            "--steps", "1", "--rounds", "2", "--warmup", "1", "--out", str(tmp_path / "res"), interpret=True,
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "res" / "step_tiny.json").read_text())
    assert doc["after"]["rope"] == "liger_kernel_patched" and doc["before"]["rope"] == "liger_kernel"
    assert doc["outputs"]["match"] is False and doc["outputs"]["after_vs_before_worst"][1] > 1e-4
    assert "**MISMATCH**" in (tmp_path / "res" / "step_tiny.md").read_text()
    assert len(doc["step_ms"]["rounds_before"]) == 2 and doc["step_ms"]["before"] > 0


@pytest.mark.timeout(900)
def test_the_gpu_script_runs_its_whole_flow_at_the_tiny_size_on_cpu(tmp_path):
    """capture -> batch -> apply --commit into the copy -> before/after bench, as on the H200, on the interpreter."""
    res = tmp_path / "results"
    env = {**os.environ, "SIZE": "tiny", "BACKEND": "interpreter", "TRITON_INTERPRET": "1", "DEVICE_ENV": "none",
           "PYTHON": sys.executable, "TOP": "1", "MAX_ROUNDS": "1", "WORKERS": "1", "ACCEPT_UNMEASURED": "1",
           "WORK": str(tmp_path / "work"), "BENCH_ARGS": "--steps 1 --rounds 2 --warmup 1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run(["bash", str(CAP / "run_step_h200.sh"), str(res)], capture_output=True, text=True, env=env,
                       timeout=880, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert sorted(p.name for p in res.iterdir()) == ["apply_all.patch", "batch_results.json", "batch_summary.md",
                                                     "capture.json", "run.log", "step_tiny.json", "step_tiny.md"]
    cap = json.loads((res / "capture.json").read_text())
    # the captured kernels are the copy's (the git repository apply commits into), ranked; one task (--top 1)
    assert all(str(tmp_path / "work" / "lib" / "liger_kernel") in k["file"] for k in cap["kernels"])
    assert len(cap["tasks"]) == 1 and cap["exit_code"] == 0
    assert [e["status"] for e in json.loads((res / "batch_results.json").read_text())["results"]] == ["done"]
    doc = json.loads((res / "step_tiny.json").read_text())
    assert doc["outputs"]["match"] is True and doc["after"]["cross_entropy"] == "liger_kernel_patched"
    assert {k["kernel"] for k in doc["kernels"]} == {k["kernel"] for k in cap["kernels"]}
    assert "== done in" in (res / "run.log").read_text()


def test_the_gpu_report_amdahl_and_table():
    """The GPU-only parts of the bench's report, from a made-up profile: Amdahl's prediction and the table."""
    sys.path.insert(0, str(CAP))
    import bench_step
    kernels = [{"kernel": "_rms_norm_forward_kernel", "ms_before": 2.0, "ms_after": 1.0, "speedup_in_step": 2.0,
                "share_of_step_before": 0.02, "task": "rms_norm_forward_kernel", "task_speedup": 1.9, "patched": True,
                "captured_share": 0.3},
               {"kernel": "liger_cross_entropy_kernel", "ms_before": 8.0, "ms_after": 8.0, "speedup_in_step": 1.0,
                "share_of_step_before": 0.08},
               {"kernel": "_swiglu_backward_kernel", "ms_before": None, "ms_after": None, "speedup_in_step": None,
                "share_of_step_before": None, "captured_share": 0.1}]
    # 2% of the step twice as fast: 1 / (0.98 + 0.01)
    assert abs(bench_step.amdahl(kernels) - 1 / 0.99) < 1e-12
    assert bench_step.amdahl(kernels[2:]) is None
    doc = {"size": "h200", "device": "NVIDIA H200", "date": "d", "what": "w", "layers": 1, "dims": S_DIMS,
           "dtype": "torch.bfloat16", "versions": {"torch": "x"},
           "step_ms": {"before": 100.0, "after": 99.0, "speedup": 100 / 99, "rounds_before": [100.0] * 6,
                       "steps_per_round": 10, "timing": "CUDA events"},
           "outputs": {"match": True, "over": {}, "rule": "r", "tolerance_rel_l2": 2e-2,
                       "after_vs_before_worst": ["loss", 0.0], "before_vs_torch_worst": ["loss", 1e-3],
                       "after_vs_torch_worst": ["loss", 1e-3], "loss_before": 11.9, "loss_after": 11.9,
                       "loss_torch": 11.9},
           "kernels": kernels, "amdahl_predicted_speedup": bench_step.amdahl(kernels)}
    md = bench_step.markdown(doc)
    assert "| step time (CUDA events, median of 6 rounds x 10 steps) | 100.000 ms | 99.000 ms | **1.010x** |" in md
    assert "predicts 1.010x" in md
    assert "| _rms_norm_forward_kernel | 2.0% | 2.000 | 1.000 | 2.00 | 1.90 | yes | 30.0% |" in md
    assert "| _swiglu_backward_kernel | - | - | - | - | - | no | 10.0% |" in md


S_DIMS = {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "mlp": 14336, "vocab": 128256, "batch": 4,
          "seq": 2048}
