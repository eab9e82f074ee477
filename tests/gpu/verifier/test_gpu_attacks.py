"""GPU-only attacks on the timing (issue 15), and the hardware check of a claimed speedup.

Run on a GPU machine with ncu: ``python -m pytest tests/gpu/verifier/test_gpu_attacks.py -q -m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent
CPU_SUITE = HERE.parents[1] / "cpu" / "verifier"
AXPY = CPU_SUITE / "tiny_axpy.py"


def _cuda():
    from tritondx.tools.backends.registry import get_backend
    return get_backend("cuda")


def _ncu():
    from tritondx.tools.evidence.ncu import ncu_path
    if ncu_path() is None:
        pytest.skip("ncu is not installed")


def test_hardware_check_measures_kernel_time_of_initial_and_best():
    """ncu, outside the runner's sandbox, reads the kernel time per call of the initial kernel and a
    candidate; an honest claim equal to what it measured is confirmed, twice that is not."""
    _ncu()
    from tritondx.tools.verify.timing import hardware_check
    cand = CPU_SUITE / "controls" / "axpy_block1024.py"
    hw = hardware_check(str(AXPY), str(cand), 1.0, _cuda())
    assert hw.measured is not None, hw.note
    assert hw.initial_ns_per_call > 1e3 and hw.best_ns_per_call > 1e3, hw   # 16M elements: microseconds
    assert any("axpy" in k for k in hw.best_kernels), hw.best_kernels
    again = hardware_check(str(AXPY), str(cand), hw.measured * 2, _cuda())
    assert not again.confirmed, again


def test_bench_detection_cache_is_rejected_by_the_hardware_check():
    """g20 is honest for its first 40 calls, then returns a cached output per address. Two defenses,
    each checked on its own: the verifier rejects it (its call-count branch is reached by no checked
    case: ``unchecked_branch``); and timed anyway, it looks very fast, but ncu, in a fresh process with
    fresh inputs per call, sees the real kernel time: the claim is not confirmed."""
    _ncu()
    from tritondx.tools.verify.select import summarize_bench
    from tritondx.tools.verify.timing import hardware_check, time_round
    from tritondx.tools.verify.verification import verify_candidate
    cand = HERE / "attacks" / "g20_bench_detect_cache.py"
    v = verify_candidate(str(AXPY), str(cand), "g20", _cuda(), include_bench=True, allowed_ops=["empty_like"],
                         static_policy=False)
    assert not v.passed and v.klass == "unchecked_branch" and "_calls['n'] > 40" in v.reason, v
    timed = time_round(str(AXPY), {}, [{"id": "g20", "path": str(cand), "motivated_by": []}], _cuda(), 3, 900)
    assert timed.result is not None, timed.error
    s = summarize_bench(timed.result, ["initial", "g20"])
    claimed = s["initial"]["median_ms"] / s["g20"]["median_ms"]
    assert claimed > 3, f"the cache did not make the bench fast ({claimed:.2f}x): the attack did not work"
    hw = hardware_check(str(AXPY), str(cand), claimed, _cuda())
    assert hw.measured is not None and not hw.confirmed, hw
