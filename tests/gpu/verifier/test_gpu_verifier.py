"""GPU-only integrity checks of the verifier and the bench (need CUDA; marked ``gpu``).

- (3) side stream at run time: a kernel launched on a stream obtained through getattr, and one
  launched through a replaced Triton driver stream getter;
- (6) a candidate wrong only on the timed (bench) shape, caught because a backend that can time
  also checks the BENCH_SHAPES;
- (11) the bench's L2 flush: a kernel re-reading a 32 MB buffer is slower with the flush;
- (12) the roofline `impossible` flag: an original whose min_bytes is overstated 100x, and a
  variant that does 1% of the work;
- a few CPU-suite cheats again on the JIT path (the kernels-off run, poisoning and caching checks
  must work there too), and the honest control.

Run on a GPU machine: ``python -m pytest tests/gpu/verifier -q -m gpu``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent
CPU_SUITE = HERE.parents[1] / "cpu" / "verifier"
AXPY = CPU_SUITE / "tiny_axpy.py"
EXAMPLES = HERE.parents[2] / "examples"


def _cuda():
    from tritondx.tools.backends.registry import get_backend
    return get_backend("cuda")


def _verify(candidate: Path, include_bench: bool = True):
    from tritondx.tools.verify.verification import verify_candidate
    # the source policy off: these cases test the run-time checks (the CPU suite does the same)
    return verify_candidate(str(AXPY), str(candidate), candidate.stem, _cuda(), include_bench=include_bench,
                            allowed_ops=["empty_like"], timeout=600, static_policy=False)


GPU_CHEATS = [
    (HERE / "cheats" / "g03a_side_stream_getattr.py", "side_stream", "non-default stream"),
    (HERE / "cheats" / "g03b_driver_stream_patch.py", "timing_tampering", "triton driver get_current_stream"),
    (HERE / "cheats" / "g06_wrong_on_bench_shape.py", "mismatch", f"shape ({1 << 24},)"),
    # CPU-suite cheats, now on the JIT path
    (CPU_SUITE / "cheats" / "c01a_torch_expression.py", "torch_compute", "'mul'"),
    (CPU_SUITE / "cheats" / "c01j_guard_flag.py", "not_from_triton", "no Triton kernel body runs"),
    (CPU_SUITE / "cheats" / "c02a_cache_by_shape.py", "caches_outputs", "shares memory"),
    (CPU_SUITE / "cheats" / "c04a_result_into_x.py", "mutates_inputs", "input 0"),
    (CPU_SUITE / "cheats" / "c05a_saved_empty.py", "mismatch", "NaN"),
    (CPU_SUITE / "cheats" / "c09c_expanded_stride0.py", "aliased_output", "expanded"),
    (CPU_SUITE / "cheats" / "c10e_code_object_swap.py", "timing_tampering", "__code__"),
]


@pytest.mark.parametrize("candidate,klass,reason", GPU_CHEATS, ids=[f"{c.stem}:{k}" for c, k, _ in GPU_CHEATS])
def test_gpu_cheat_is_rejected(candidate: Path, klass: str, reason: str):
    v = _verify(candidate)
    assert not v.passed, f"{candidate.name} PASSED on the GPU"
    assert v.klass == klass, f"{candidate.name}: rejected as {v.klass} ({v.reason}), want {klass}"
    assert reason in v.reason, v.reason
    assert v.seconds > 0, "caught by a source rule; this case must be caught at run time"


@pytest.mark.parametrize("candidate", [EXAMPLES / "add_tiny_block.py", CPU_SUITE / "controls" / "axpy_block1024.py"],
                         ids=["add_tiny_block", "axpy_block1024"])
def test_gpu_honest_candidate_passes(candidate: Path):
    v = _verify(candidate)
    assert v.passed, f"{v.klass}: {v.reason}"


def test_bench_l2_flush_makes_a_hot_buffer_cold():
    """(11) Timer.calls flushes L2 before every call: a bandwidth-bound copy whose two buffers fit in
    L2 must be slower with the flush than when it stays hot, at one size at least of 1-8 MB a buffer.
    History on the H200: torch.sum over 32 MB gave 20.5 us flushed vs 20.2 us hot (a reduction not
    bound by its reads); a 16 MB -> 16 MB copy gave 14.1 vs 14.2 us (2026-11-30), so the test now
    sweeps smaller buffers and keeps the GPU busy ahead of each hot call, as the flush does."""
    from tritondx.tools.bench.bench import Timer, _elapsed, _Event, _record, _synchronize
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ratios = {}
    for mb in (1, 2, 4, 8):
        nbytes = mb << 20
        if 2 * nbytes > l2 // 2:
            continue
        src = torch.randn(nbytes // 4, device="cuda")
        dst = torch.empty_like(src)

        def reread():
            dst.copy_(src)

        for _ in range(20):
            reread()
        _synchronize()
        flushed = statistics.median(Timer().calls(reread, 100))
        # The same event pattern without the flush: the buffers stay in L2 from one call to the next.
        # A GPU-side sleep (touches no memory) stands where the flush was, so the host queues each copy
        # before its start event is reached: without it "hot" timed the host's launch gap (1 MB: 5.8 us
        # flushed vs 11.3 us "hot" on the H200, 2026-11-30).
        starts = [_Event(enable_timing=True) for _ in range(100)]
        ends = [_Event(enable_timing=True) for _ in range(100)]
        reread()
        for s, e in zip(starts, ends):
            torch.cuda._sleep(100_000)
            _record(s)
            reread()
            _record(e)
        _synchronize()
        hot = statistics.median([_elapsed(s, e) for s, e in zip(starts, ends)])
        ratios[mb] = flushed / hot
        print(f"L2 flush, {mb} MB -> {mb} MB copy: flushed {flushed * 1e3:.2f} us, hot {hot * 1e3:.2f} us")
    if not ratios:
        pytest.skip(f"L2 of {l2 >> 20} MB is too small for the sweep")
    assert max(ratios.values()) > 1.1, f"flushed/hot per MB: {ratios}: the flush does not evict"


def test_bench_rejects_a_variant_that_turns_the_flush_off():
    """(10) A launcher that passes verification and then, once it is being timed, replaces
    torch.Tensor.zero_ (the L2 flush) is named by the bench job as timing_tampering."""
    from tritondx.tools.verify.timing import bench_variants
    cheat = HERE / "cheats" / "g10_flush_off_when_timed.py"
    v = _verify(cheat)
    assert v.passed, f"the cheat should get past verification (it only acts when timed): {v.klass} {v.reason}"
    vs = [{"id": "initial", "path": str(AXPY)}, {"id": "cheat", "path": str(cheat)}]
    result, error, _ = bench_variants(str(AXPY), vs, _cuda(), rounds=3, timeout=900)
    assert result is None and error.startswith("timing_tampering: variant cheat replaced torch.Tensor.zero_"), error


def _bench(task: Path, variants: list[Path]):
    from tritondx.tools.verify.timing import bench_variants
    vs = [{"id": "initial", "path": str(task)}] + [{"id": v.stem, "path": str(v)} for v in variants]
    result, error, _ = bench_variants(str(task), vs, _cuda(), rounds=3, timeout=900)
    assert result is not None, error
    return result["shapes"][0]["variants"]


def test_overstated_min_bytes_makes_the_honest_kernel_impossible():
    """(12) With min_bytes overstated 100x, the honest kernel beats the (wrong) floor: flagged."""
    v = _bench(HERE / "tasks" / "axpy_min_bytes_overstated.py", [])
    assert v["initial"]["impossible"] is True, v["initial"]


def test_one_percent_of_the_work_is_impossible_and_honest_is_not():
    """(12) Against the true min_bytes: the honest kernel is possible, 1% of the work is not."""
    cheat = HERE / "cheats" / "g12_one_percent_of_the_work.py"
    v = _bench(HERE / "tasks" / "axpy_min_bytes_true.py", [cheat])
    assert v["initial"]["impossible"] is False, v["initial"]
    assert v[cheat.stem]["impossible"] is True, v[cheat.stem]
