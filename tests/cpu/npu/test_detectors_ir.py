"""Detectors on stored / inline IR (no triton-ascend needed). The .ttir/.ttadapter files in data/
were captured from kernels/ with triton-ascend 3.2.0 for Ascend910B4 (paths rewritten to /repo/kernels/)."""

from pathlib import Path

import pytest
from tritondx.tools.ir.registry import REGISTRY, catalog_table, detectors
from tritondx.tools.npu.analyze import analyze_kernel

DATA = Path(__file__).parent / "data"
KERNELS = Path(__file__).parent / "kernels"


def ir(name: str, stage: str) -> str:
    return (DATA / f"{name}.{stage}").read_text()


def detectors_of(findings):
    return {f.detector for f in findings}


def test_catalog_shape():
    cat = catalog_table("ascend")
    assert len(cat) >= 10 and len({c["id"] for c in cat}) == len(cat)
    for c in cat:
        assert c["tier"] in ("ir", "compiler") and set(c["stages"]) <= {"ttir", "ttadapter"}
        assert REGISTRY[c["id"]].stage in ("ttir", "ttadapter") and c["targets"] == ["ascend"]
        assert c["suggests"] and c["description"]
    assert REGISTRY["ascend_ub_overflow"].stage == "ttadapter"
    with pytest.raises(KeyError):
        REGISTRY["nope"]


def test_stored_gather_ir():
    src = (KERNELS / "k_gather.py").read_text()
    fs = analyze_kernel("gather_kernel", "ascend910b", ttir=ir("gather_kernel", "ttir"),
                        ttadapter=ir("gather_kernel", "ttadapter"), grid=(4,), source=src)
    assert detectors_of(fs) == {"ascend_discrete_scalar_loop", "ascend_too_few_programs"}
    d = next(f for f in fs if f.detector == "ascend_discrete_scalar_loop")
    line = src.splitlines().index("    x = tl.load(x_ptr + idx, mask=m)") + 1
    assert d.source_line == line and d.source_text == "x = tl.load(x_ptr + idx, mask=m)"
    assert d.id == f"ascend_discrete_scalar_loop:gather_kernel:{line}"
    # on the 40-program grid only the IR-level problem remains
    fs40 = analyze_kernel("gather_kernel", "ascend910b", ttadapter=ir("gather_kernel", "ttadapter"), grid=(40,))
    assert detectors_of(fs40) == {"ascend_discrete_scalar_loop"}


def test_stored_mask_loop_ir():
    fs = analyze_kernel("row_scale_kernel", "ascend910b", ttadapter=ir("row_scale_kernel", "ttadapter"), grid=(40,))
    (f,) = [f for f in fs if f.detector == "ascend_mask_in_loop"]
    assert f.metric["padded_loads"] == 1 and f.metric["masked_stores"] == 1 and f.metric["tile_elements"] == 1024
    assert f.suggests == ["mask_removal"]


def test_stored_big_tile_ir_per_target():
    a2 = analyze_kernel("big_tile_kernel", "ascend910b", ttadapter=ir("big_tile_kernel", "ttadapter"), grid=(40,))
    assert "ascend_ub_overflow" in detectors_of(a2)
    # the same IR, judged against a (hypothetical) much larger UB, does not overflow
    big = REGISTRY["ascend_ub_overflow"]
    from tritondx.tools.npu.targets import resolve_target
    roomy = resolve_target("ascend950").model_copy(update={"ub_bytes": 4 << 20})
    assert analyze_kernel("big_tile_kernel", roomy, ttadapter=ir("big_tile_kernel", "ttadapter"),
                          grid=(64,), detectors=[big]) == []


DOT_TTIR = '''module {
  tt.func public @k(%arg0: !tt.ptr<f16> loc("/repo/k.py":3:0)) attributes {noinline = false} {
    %5 = tt.dot %3, %4, %cst, inputPrecision = ieee : tensor<%Mx%Kxf16> * tensor<%Kx%Nxf16> -> tensor<%Mx%Nxf32> loc(#loc9)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
#loc = loc("/repo/k.py":3:0)
#loc1 = loc(unknown)
#loc9 = loc("/repo/k.py":12:8)
'''


@pytest.mark.parametrize("m,n,k,dtype,fires", [
    (24, 40, 24, "f16", True), (32, 32, 32, "f16", False), (16, 16, 8, "f32", False),
    (16, 16, 16, "i8", True), (16, 16, 32, "i8", False),
])
def test_dot_alignment(m, n, k, dtype, fires):
    text = DOT_TTIR.replace("%M", str(m)).replace("%N", str(n)).replace("%K", str(k)).replace("xf16>", f"x{dtype}>", 2)
    fs = analyze_kernel("k", "ascend910b", ttir=text, detectors=[REGISTRY["ascend_dot_block_not_multiple_of_16"]])
    assert bool(fs) == fires
    if fires:
        assert fs[0].source_line == 12 and fs[0].metric["M"] == m


I64_TTIR = '''module {
  tt.func public @k(%arg0: !tt.ptr<f32> loc(#loc)) attributes {noinline = false} {
    %1 = arith.extsi %0 : i32 to i64 loc(#loc3)
    %4 = arith.extsi %3 : tensor<1024xi32> to tensor<1024xi64> loc(#loc6)
    %6 = arith.addi %5, %4 : tensor<1024xi64> loc(#loc6)
    %9 = arith.cmpi slt, %6, %8 : tensor<1024xi64> loc(#loc7)
    %10 = arith.addi %a, %b : tensor<1024xi32> loc(#loc7)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc("/repo/k.py":3:0)
#loc3 = loc("/repo/k.py":4:10)
#loc6 = loc("/repo/k.py":5:10)
#loc7 = loc("/repo/k.py":6:10)
'''


def test_int64_index_math_counts_only_i64_tensor_ops():
    (f,) = analyze_kernel("k", "ascend910b", ttir=I64_TTIR, detectors=[REGISTRY["ascend_int64_index_math"]])
    assert f.metric["i64_tensor_ops"] == 3 and f.source_line == 5 and f.severity == "low"
    clean = I64_TTIR.replace("xi64>", "xi32>")
    assert analyze_kernel("k", "ascend910b", ttir=clean, detectors=[REGISTRY["ascend_int64_index_math"]]) == []


def test_launch_level_detectors_from_metadata():
    ttir = ir("gather_kernel", "ttir")
    src = "def launch(x):\n    gather_kernel[grid](x, num_warps=8)\n"
    fs = analyze_kernel("gather_kernel", "ascend910b", ttir=ttir, grid=(70000, 1, 1), num_warps=8,
                        num_warps_explicit=True, source=src)
    got = {f.detector: f for f in fs}
    assert set(got) == {"ascend_grid_over_65535", "ascend_gpu_launch_settings"}
    assert got["ascend_gpu_launch_settings"].source_line == 2
    assert got["ascend_grid_over_65535"].metric["num_programs"] == 70000
    # default num_warps, Config-default num_stages: nothing to report
    assert analyze_kernel("gather_kernel", "ascend910b", ttir=ttir, grid=(40,), num_warps=4,
                          num_warps_explicit=True, num_stages=2) == []


def test_core_count_detectors_follow_mix_mode():
    adapter = ir("gather_kernel", "ttadapter")            # mix_mode = "aiv": 40 vector cores on 910B4
    few = REGISTRY["ascend_too_few_programs"]
    waves = REGISTRY["ascend_grid_exceeds_cores"]
    assert analyze_kernel("g", "ascend910b", ttadapter=adapter, grid=(39,), detectors=[few])
    assert not analyze_kernel("g", "ascend910b", ttadapter=adapter, grid=(40,), detectors=[few])
    assert not analyze_kernel("g", "ascend910b", ttadapter=adapter, grid=(120,), detectors=[waves])
    (f,) = analyze_kernel("g", "ascend910b", ttadapter=adapter, grid=(160,), detectors=[waves])
    assert f.metric["waves"] == 4 and f.metric["cores"] == 40
    cube = adapter.replace('mix_mode = "aiv"', 'mix_mode = "mix"')
    (f,) = analyze_kernel("g", "ascend910b", ttadapter=cube, grid=(10,), detectors=[few])
    assert f.metric["cores"] == 20 and f.metric["core_kind"].startswith("AI")


def test_detectors_skip_missing_stages():
    assert analyze_kernel("k", "ascend910b") == []
    for det in detectors("ascend"):
        assert det.id and det.tier in ("ir", "compiler")


def test_core_count_without_adapter_stage_guesses_from_ttir():
    few = REGISTRY["ascend_too_few_programs"]
    (f,) = analyze_kernel("g", "ascend910b", ttir=ir("gather_kernel", "ttir"), grid=(8,), detectors=[few])
    assert f.metric["cores"] == 40                         # no tt.dot: vector cores
    dot = DOT_TTIR.replace("%M", "32").replace("%N", "32").replace("%K", "32")
    (f,) = analyze_kernel("k", "ascend910b", ttir=dot, grid=(8,), detectors=[few])
    assert f.metric["cores"] == 20 and f.metric["mix_mode"] == "mix"
