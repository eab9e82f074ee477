"""Every detector on kernels compiled by triton-ascend: a positive kernel fires it, a counter-example
does not (needs the ascend venv; the captures are shared per session)."""

import pytest
from tritondx.tools.records.evidence import Finding
from tritondx.tools.ir.registry import detectors
from tritondx.tools.npu.analyze import analyze_capture

# detector id -> (positive kernel, counter-example kernel), all on ascend910b (Ascend910B4)
CASES = {
    "ascend_discrete_scalar_loop": ("k_gather", "k_contiguous"),
    "ascend_unstructured_access": ("k_gather_rows", "k_contiguous"),
    "ascend_mask_in_loop": ("k_mask_loop", "k_loop_nomask"),
    "ascend_branch_in_loop": ("k_branch_loop", "k_loop_nomask"),
    "ascend_int64_index_math": ("k_int64", "k_contiguous"),
    "ascend_ub_overflow": ("k_ub_big", "k_contiguous"),
    "ascend_multibuffer_headroom": ("k_ub_nodouble", "k_loop_nomask"),
    "ascend_grid_over_65535": ("k_big_grid", "k_contiguous"),
    "ascend_dot_block_not_multiple_of_16": ("k_dot_odd", "k_dot_ok"),
    "ascend_gpu_launch_settings": ("k_gpu_settings", "k_contiguous"),
    "ascend_too_few_programs": ("k_gather", "k_contiguous"),
    "ascend_grid_exceeds_cores": ("k_many_waves", "k_contiguous"),
}


def _findings(captures, stem, target="ascend910b") -> list[Finding]:
    return analyze_capture(captures[(stem, target)])


def test_every_detector_has_a_case():
    assert set(CASES) == {d.id for d in detectors("ascend")}
    assert len(CASES) >= 10


@pytest.mark.parametrize("det_id", sorted(CASES))
def test_positive_kernel_fires(captures, det_id):
    stem = CASES[det_id][0]
    hits = [f for f in _findings(captures, stem) if f.detector == det_id]
    assert hits, f"{det_id} did not fire on {stem}"
    det = next(d for d in detectors("ascend") if d.id == det_id)
    for f in hits:
        assert f.tier == det.tier and f.stage == det.stage and f.kernel
        assert f.suggests and set(f.suggests) <= set(det.suggests) | set(f.suggests)
        assert f.metric
        assert f.source_line is not None and f.source_text, f"{det_id}: no source line"


@pytest.mark.parametrize("det_id", sorted(CASES))
def test_counter_example_does_not_fire(captures, det_id):
    stem = CASES[det_id][1]
    assert not [f for f in _findings(captures, stem) if f.detector == det_id]


def test_clean_kernel_fires_nothing(captures):
    assert _findings(captures, "k_contiguous") == []
    assert _findings(captures, "k_loop_nomask") == []


def test_discrete_access_evidence(captures):
    (f,) = [f for f in _findings(captures, "k_gather") if f.detector == "ascend_discrete_scalar_loop"]
    assert f.severity == "high" and f.metric["elements"] == 1024 and f.metric["access"] == "load"
    assert "scf.for" in f.ir_line and "x = tl.load(x_ptr + idx" in f.source_text
    assert "contiguous_retile" in f.suggests


def test_ub_overflow_evidence(captures):
    (f,) = [f for f in _findings(captures, "k_ub_big") if f.detector == "ascend_ub_overflow"]
    assert f.metric["ub_capacity_bytes"] == 192 * 1024
    assert f.metric["largest_buffer_bytes"] == 65536 * 4 and f.severity == "high"
    assert "memref.alloc" in f.ir_line and "ub_retile" in f.suggests


def test_launch_level_findings_point_at_the_launch_line(captures):
    (f,) = [f for f in _findings(captures, "k_gpu_settings") if f.detector == "ascend_gpu_launch_settings"]
    assert "num_warps=8" in f.source_text and f.metric["num_warps"] == 8 and f.metric["num_stages"] == 3
    assert f.suggests == ["remove_gpu_launch_settings"]
    (g,) = [f for f in _findings(captures, "k_big_grid") if f.detector == "ascend_grid_over_65535"]
    assert "tiny_block_kernel[" in g.source_text and g.metric["num_programs"] == 131072


def test_dot_evidence(captures):
    (f,) = [f for f in _findings(captures, "k_dot_odd") if f.detector == "ascend_dot_block_not_multiple_of_16"]
    assert (f.metric["M"], f.metric["N"], f.metric["K"]) == (24, 40, 24)
    assert "tt.dot" in f.ir_line and "tl.dot(a, b)" in f.source_text


def test_950_figures(captures):
    # 950: 64 vector cores and a 248 KB UB; the nodouble kernel still cannot double-buffer
    fs = _findings(captures, "k_gather", "ascend950")
    few = next(f for f in fs if f.detector == "ascend_too_few_programs")
    assert few.metric["cores"] == 64
    assert any(f.detector == "ascend_discrete_scalar_loop" for f in fs)
    (mb,) = [f for f in _findings(captures, "k_ub_nodouble", "ascend950") if f.detector == "ascend_multibuffer_headroom"]
    assert mb.metric["ub_capacity_bytes"] == 248 * 1024 and mb.severity == "low"


def test_finding_ids_are_unique_per_run(captures):
    for key, cap in captures.items():
        ids = [f.id for f in analyze_capture(cap)]
        assert len(ids) == len(set(ids)), key


def test_scatter_is_a_scalar_store_loop_not_a_branch(captures):
    fs = _findings(captures, "k_scatter")
    (f,) = [f for f in fs if f.detector == "ascend_discrete_scalar_loop"]
    assert f.metric["access"] == "store" and "tl.store(out_ptr + idx" in f.source_text
    # the per-element mask guard inside the scalar loop is not reported as a branch in a loop
    assert not [f for f in fs if f.detector in ("ascend_branch_in_loop", "ascend_mask_in_loop")]
