"""GPU: the measurement path (run on a CUDA machine: pytest tests/gpu -m gpu)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_bench_variants_side_by_side(tmp_path):
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.timing import bench_variants
    task = str(EXAMPLES / "add_tiny_block.py")
    faster = tmp_path / "faster.py"
    faster.write_text(Path(task).read_text().replace("BLOCK = 128", "BLOCK = 1024").replace("num_warps=1",
                                                                                           "num_warps=4"))
    res, err, _ = bench_variants(task, [{"id": "initial", "path": task}, {"id": "c", "path": str(faster)}],
                                 get_backend("cuda"), rounds=3, baselines=True)
    assert res, err
    c = res["ceilings"]
    assert 1e12 < c["copy_bytes_per_s"] < 2e13 and c["matmul_flops_per_s"]["bf16"] > 1e14
    entry = res["shapes"][0]
    for vid in ("initial", "c", "torch_eager"):
        v = entry["variants"][vid]
        assert v["median_ms"] > 0 and len(v["round_medians_ms"]) == 3 and v["spread"] >= 0
        assert 0 < v["roofline_fraction"] <= 1.25
    assert entry["input_sets"] >= 1


def test_optimize_on_cuda_measures(tmp_path):
    exe = shutil.which("tritondx") or f"{sys.executable} -m tritondx.cli"
    out = tmp_path / "run"
    r = subprocess.run([*exe.split(), "optimize", str(EXAMPLES / "add_tiny_block.py"), "--backend", "cuda",
                        "--out", str(out), "--max-rounds", "1"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["speed"] == "measured" and rep["speedup"] and rep["best"]["roofline_fraction"]
    assert any(a["kind"] == "bench" for a in rep["artifacts"].values()) or rep["rounds"] >= 1
