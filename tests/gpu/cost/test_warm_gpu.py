"""Warm runners on CUDA: the zygote imports torch and Triton without touching CUDA, each forked child
initializes CUDA itself and runs the JIT path; one judge job verifies a round (needs a GPU; ``gpu``).

Run on a GPU machine: ``python -m pytest tests/gpu/cost -q -m gpu``."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CPU_SUITE = Path(__file__).resolve().parents[2] / "cpu" / "verifier"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_a_round_on_cuda_through_one_warm_runner():
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_round
    honest = [EXAMPLES / "add_tiny_block.py", CPU_SUITE / "controls" / "axpy_block1024.py"]
    wrong = CPU_SUITE / "wrong" / "w_nan_output.py"
    cands = [{"id": f"c{i}", "path": str(p)} for i, p in enumerate(honest + [wrong] + honest)]
    with structlog.testing.capture_logs() as logs:
        vs = verify_round(str(CPU_SUITE / "tiny_axpy.py"), cands, get_backend("cuda"), ["empty", "empty_like"],
                          300, 1, static_policy=False)
    runners = [e.get("runners") for e in logs if e.get("event") == "verify_round"]
    assert runners and runners[0].startswith("warm"), runners
    assert [v.passed for v in vs] == [True, True, False, True, True], [(v.klass, v.reason) for v in vs]
    assert vs[2].klass == "mismatch"
