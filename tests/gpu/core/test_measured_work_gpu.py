"""GPU: the work ncu counts for a tl.dot GEMM agrees with the IR's count (2*M*N*K), or, where the GEMM
issues Hopper's wgmma (which the tensor-path op counters do not count), ncu gives no FLOP count rather
than 0; its DRAM bytes are at least the inputs read once (run: pytest tests/gpu -m gpu).

This also settles how tools/evidence/ncu.py turns ``sm__ops_path_tensor_*`` into FLOPs (FLOP_METRICS: one op
counted as one FLOP): if the ratio reads 0.5 or 2, fix the factor there."""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
ROOT = Path(__file__).resolve().parents[3]


def test_ncu_and_ir_count_the_same_gemm_flops(tmp_path):
    from tritondx.tools.evidence.ncu import measured_work, ncu_path, profile_counters
    from tritondx.tools.evidence.work import ir_work
    if ncu_path() is None:
        pytest.skip("ncu not installed")
    src = (ROOT / "bench" / "suite" / "l3_matmul.py").read_text()
    src = re.sub(r"\ndef (flops|min_bytes)\(.*?(?=\n\n\n|\nCHECK_SHAPES)", "", src, flags=re.S)
    src = re.sub(r"BENCH_SHAPES = .*", "BENCH_SHAPES = [(2048, 2048, 2048)]", src)
    task = tmp_path / "gemm.py"
    task.write_text(src)
    rows, note = profile_counters(str(task))
    assert rows, note
    ncu = measured_work(rows)
    ir = ir_work(str(task), [(2048, 2048, 2048)])["[2048, 2048, 2048]"]
    assert ir["flops"] == 2 * 2048 ** 3
    gmma = [r.get("wgmma_instructions") for r in rows]
    if any(gmma):  # sm_90 wgmma: the op counters read 0 there, so no hardware count (not a count of 0)
        assert ncu["flops"] is None and "wgmma" in ncu["flops_note"], ncu
    else:
        assert ncu["flops"] == pytest.approx(ir["flops"], rel=0.05), (ncu, ir)
    # DRAM: the inputs read at least once (the 8 MB output can stay in the H200's 50 MB L2 past the kernel)
    assert ncu["dram_bytes"] >= 2 * 2048 * 2048 * 2 * 0.95, ncu


def test_ncu_profiles_only_the_launchers_last_call(tmp_path):
    """The inputs are made with CUDA kernels and the launcher autotunes over 3 configs: only the last
    call is in the profiler range, so ncu reports the Triton kernel once, and no input or trial launch."""
    from tritondx.tools.evidence.ncu import ncu_path, profile_counters
    if ncu_path() is None:
        pytest.skip("ncu not installed")
    task = tmp_path / "tuned_scale.py"
    task.write_text('''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (256, 512, 1024)], key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


def launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out


def reference(x):
    return x * 2.0


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, generator=g, device=device, dtype=dtype).exp().sqrt(),)


CHECK_SHAPES = [(1000,)]
BENCH_SHAPES = [(1 << 22,)]
DTYPES = [torch.float32]
''')
    rows, note = profile_counters(str(task))
    assert rows, note
    assert [r["kernel"] for r in rows] == ["scale_kernel"], [r["kernel"][:60] for r in rows]
