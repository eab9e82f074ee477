"""GPU: `tritondx capture` times launches with CUDA events from Triton's launch hooks; the captured task
verifies on cuda in oracle mode (run on a CUDA machine: pytest tests/gpu -m gpu)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
PROGRAM = Path(__file__).resolve().parents[2] / "cpu" / "capture" / "program"


def test_capture_on_cuda_uses_cuda_events_and_the_task_verifies(tmp_path):
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.task.probe_job import probe_task
    from tritondx.tools.verify.verification import verify_candidate
    exe = shutil.which("tritondx") or f"{sys.executable} -m tritondx.cli"
    out = tmp_path / "tasks"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([*exe.split(), "capture", "--out", str(out), "--", "python", "main.py"],
                       capture_output=True, text=True, timeout=900, cwd=PROGRAM, env={**env, "DEVICE": "cuda"})
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "capture.json").read_text())
    assert summary["timing"] == "cuda_events" and "GPU time" in r.stdout
    assert {k["kernel"] for k in summary["kernels"]} == {"scale_add_kernel", "row_sum_kernel"}
    assert all(k["total_ms"] > 0 and k["launches"] == 3 for k in summary["kernels"])
    backend = get_backend("cuda")
    for name in ("scale_add_kernel", "row_sum_kernel"):
        task = str(out / f"{name}.py")
        probe = probe_task(task, backend)
        v = verify_candidate(task, task, "initial", backend, allowed_ops=probe.get("ops", []), timeout=600)
        assert v.passed, (name, v.reason)
