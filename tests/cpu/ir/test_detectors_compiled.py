"""Every NVIDIA detector on IR compiled (CPU, cuda:90) from a tiny real kernel that has the problem,
and on a counter-example kernel where it must stay silent.

The kernels mark the line a finding must cite with a comment (``# LOAD-X``); a test checks both the
quoted source text and that ``source_line`` really is that line of the task file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.detectors.pass_summary import pass_changes, pass_structure_changes
from tritondx.tools.ir.registry import REGISTRY, detectors, run_detectors

KERNELS = Path(__file__).parent / "kernels"


def fire(captures, det_id: str, stem: str):
    return REGISTRY[det_id].run_capture(captures[stem])


def marker_line(stem: str, marker: str) -> int:
    lines = (KERNELS / f"{stem}.py").read_text().splitlines()
    hits = [i + 1 for i, t in enumerate(lines) if t.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker} must appear once in {stem}"
    return hits[0]


# (detector, kernel with the problem, marker of the line a finding cites or None, severity or None, ir_line fragment)
POSITIVE = [
    ("non_vectorized_global_access", "k_misaligned", "LOAD-X", "high", "ld.global.b32"),
    ("dot_not_tensor_core", "k_dot_ieee", "DOT", "high", "tt.dot"),
    ("mma_v2_not_wgmma", "k_dot_small_m", "DOT", "high", "mma.sync.aligned.m16n8k16"),
    ("fp32_dot_operands", "k_dot_upcast", "UPCAST-A", "high", "arith.extf"),
    ("register_spills", "k_spill", None, "high", None),
    ("low_occupancy", "k_spill", None, None, None),
    ("grid_too_small", "k_small_grid", None, "high", None),
    ("tail_effect", "k_tail", None, "low", None),
    ("tiny_programs", "k_vadd_tiny", None, "high", None),
    ("int64_index_arithmetic", "k_int64", "I64", "low", "i64"),
    ("atomics_in_hot_path", "k_atomic", "ATOMIC", None, "tt.atomic_rmw"),
    ("excessive_layout_conversions", "k_layout_cvt", None, None, "ttg.convert_layout"),
    ("masked_loads_in_loop", "k_norm_three_loops", "LOAD-1", "low", "tt.load"),
    ("coalesce_layout", "k_transposed", "LOAD-T", None, "tt.load"),
    ("accelerate_matmul_result", "k_dot_small_m", "DOT", "high", "tt.dot"),
    ("unpipelined_loop", "k_small_grid", "LOAD-ROW", None, "tt.load"),
    ("layout_conversions_survived", "k_layout_cvt", None, "low", "ttg.convert_layout"),
    ("missing_alignment_info", "k_misaligned", "LOAD-X", "high", "tt.load"),
    ("uncoalesced_access", "k_strided", "LOAD-STRIDED", "high", "tt.load"),
    ("uncoalesced_access", "k_transposed", "LOAD-T", "high", "tt.load"),
    ("fp32_dot_without_tf32", "k_dot_ieee", "DOT", "high", "tt.dot"),
    ("redundant_recomputation", "k_redundant", "LOAD-W", None, None),
    ("multi_pass_reduction", "k_norm_three_loops", "LOAD-1", "high", "tt.load"),
    ("shared_memory_bank_conflicts", "k_dot_ieee", "LOAD-A", None, "ttg.local_load"),
    ("launch_overhead_dominating", "k_launches", "LAUNCH", None, "scale_small_kernel["),
    ("shared_memory_occupancy", "k_big_smem", "LOAD-A", None, "ttg.local_alloc"),
    ("async_load_path", "k_tma", "TMA-A", "info", "ttng.async_tma_copy_global_to_local"),
    ("async_load_path", "k_norm_three_loops", "LOAD-1", "low", "tt.load"),
    ("pass_summary", "k_dot_f16", None, "info", None),
]

# (detector, kernel where it must not fire)
NEGATIVE = [
    ("non_vectorized_global_access", "k_vadd"),
    ("dot_not_tensor_core", "k_dot_f16"),
    ("mma_v2_not_wgmma", "k_dot_f16"),
    ("fp32_dot_operands", "k_dot_f16"),
    ("register_spills", "k_vadd"),
    ("low_occupancy", "k_vadd"),
    ("grid_too_small", "k_vadd"),
    ("tail_effect", "k_vadd"),
    ("tiny_programs", "k_vadd"),
    ("int64_index_arithmetic", "k_vadd"),
    ("atomics_in_hot_path", "k_vadd"),
    ("excessive_layout_conversions", "k_transposed"),
    ("masked_loads_in_loop", "k_small_grid"),
    ("masked_loads_in_loop", "k_dot_f16"),  # the pipeliner's own predicates on cp.async are not user masks
    ("coalesce_layout", "k_vadd"),
    ("accelerate_matmul_result", "k_dot_f16"),
    ("unpipelined_loop", "k_dot_f16"),
    ("layout_conversions_survived", "k_vadd"),
    ("missing_alignment_info", "k_vadd"),
    ("missing_alignment_info", "k_transposed"),  # stride without divisibility, but no contiguous dim to vectorize
    ("uncoalesced_access", "k_vadd"),
    ("uncoalesced_access", "k_dot_f16"),
    ("fp32_dot_without_tf32", "k_dot_upcast"),    # f32 operands, but tf32
    ("redundant_recomputation", "k_dot_f16"),     # A depends on pid_m, B on pid_n: inherent tile reuse
    ("redundant_recomputation", "k_vadd"),
    ("multi_pass_reduction", "k_small_grid"),
    ("multi_pass_reduction", "k_dot_f16"),
    ("shared_memory_bank_conflicts", "k_dot_f16"),
    ("shared_memory_bank_conflicts", "k_dot_upcast"),
    ("launch_overhead_dominating", "k_vadd"),
    ("shared_memory_occupancy", "k_dot_f16"),
    ("shared_memory_occupancy", "k_vadd"),
    ("async_load_path", "k_vadd"),
    ("pass_summary", "k_scalar"),
]


def test_every_detector_has_a_compiled_positive_and_negative():
    ids = {d.id for d in detectors("cuda")}
    assert ids == {d for d, *_ in POSITIVE}, ids ^ {d for d, *_ in POSITIVE}
    assert ids == {d for d, _ in NEGATIVE}, ids ^ {d for d, _ in NEGATIVE}


@pytest.mark.parametrize("det_id,stem,marker,severity,ir_frag", POSITIVE,
                         ids=[f"{p[0]}-{p[1]}" for p in POSITIVE])
def test_fires_on_compiled_kernel(captures, det_id, stem, marker, severity, ir_frag):
    found = fire(captures, det_id, stem)
    assert found, f"{det_id} did not fire on {stem}"
    f = found[0]
    det = REGISTRY[det_id]
    assert f.detector == det_id and f.tier == det.tier and f.kernel
    assert f.suggests == list(det.suggests)
    if severity:
        assert f.severity == severity, f.message
    if ir_frag:
        assert f.ir_line and ir_frag in f.ir_line, f.ir_line
    if marker:
        line = marker_line(stem, marker)
        hits = [x for x in found if x.source_line == line]
        assert hits, f"{det_id} cites lines {[x.source_line for x in found]}, expected {line} ({marker})"
        assert hits[0].source_text and hits[0].source_text.endswith(f"# {marker}")


@pytest.mark.parametrize("det_id,stem", NEGATIVE, ids=[f"{n[0]}-{n[1]}" for n in NEGATIVE])
def test_silent_on_counter_example(captures, det_id, stem):
    for k in captures[stem]:  # a counter-example must have what the detector reads, or it proves nothing
        assert set(REGISTRY[det_id].required_stages) <= set(k.texts), (det_id, stem, sorted(k.texts))
    found = fire(captures, det_id, stem)
    assert not found, [f.message for f in found]


def test_good_kernels_only_get_facts(captures):
    """On the well-formed kernels only the informational compiler facts fire."""
    for stem in ("k_vadd", "k_dot_f16"):
        ks = captures[stem]
        found = run_detectors(ks, "ir") + run_detectors(ks, "compiler")
        assert {f.severity for f in found} <= {"info"}, [(f.detector, f.message) for f in found]


def test_findings_cite_the_kernel_source_not_triton_library(captures):
    for stem in ("k_norm_three_loops", "k_dot_ieee", "k_layout_cvt"):
        for f in run_detectors(captures[stem], "ir") + run_detectors(captures[stem], "compiler"):
            if f.source_line is not None:
                src = (KERNELS / f"{stem}.py").read_text().splitlines()[f.source_line - 1].strip()
                assert f.source_text == src


def test_missing_alignment_names_the_unspecialized_arguments(captures):
    f = fire(captures, "missing_alignment_info", "k_misaligned")
    by_line = {x.source_line: x for x in f}
    load = by_line[marker_line("k_misaligned", "LOAD-X")]
    assert load.metric["arguments"] == "%x_ptr,%n_elements"
    assert load.metric["ptx_bytes"] == 4 and load.metric["layout_bytes"] == 16
    rec = captures["k_misaligned"][0].record
    assert not rec["attrs"].get("(0,)") and not rec["attrs"].get("(2,)")  # the JIT did not specialize them
    assert rec["attrs"]["(1,)"] == [["tt.divisibility", 16]]


def test_uncoalesced_reports_stride_and_layout(captures):
    (f,) = fire(captures, "uncoalesced_access", "k_strided")
    assert f.metric["stride"] == "%stride_m" and f.metric["contiguous_dim"] == -1
    (t,) = fire(captures, "uncoalesced_access", "k_transposed")
    assert t.metric["stride"] in ("%stride_xm", "%stride_xn")
    assert "do_not_specialize" in t.message


def test_redundant_recomputation_reports_unused_grid_axis(captures):
    found = fire(captures, "redundant_recomputation", "k_redundant")
    axis = [f for f in found if "grid axis 1" in f.message]
    assert axis and axis[0].severity == "high" and axis[0].metric["programs_on_axis"] == 4
    inv = [f for f in found if "invariant_bytes" in f.metric]
    assert inv and inv[0].metric["invariant_bytes"] == 2048 * 4


def test_multi_pass_lists_every_loop(captures):
    (f,) = fire(captures, "multi_pass_reduction", "k_norm_three_loops")
    assert f.metric["passes"] == 3 and f.metric["argument"] == "%x_ptr"
    for m in ("LOAD-1", "LOAD-2", "LOAD-3"):
        assert str(marker_line("k_norm_three_loops", m)) in f.message


def test_bank_conflict_estimate(captures):
    (f,) = fire(captures, "shared_memory_bank_conflicts", "k_dot_ieee")
    assert f.metric["ways"] == 8 and f.metric["row_bytes"] == 128


def test_launch_overhead_counts_launches(captures):
    (f,) = fire(captures, "launch_overhead_dominating", "k_launches")
    assert f.metric["launches"] == 3 and f.metric["small_launches"] == 3
    assert len(captures["k_launches"]) == 3


def test_load_path_facts(captures):
    (tma,) = fire(captures, "async_load_path", "k_tma")
    assert tma.metric["tma"] >= 2 and tma.metric["plain"] == 0 and tma.metric["ptx_cp_async_bulk_tensor"] >= 2
    (cp,) = fire(captures, "async_load_path", "k_dot_f16")
    assert cp.metric["cp_async"] >= 2 and cp.severity == "info" and cp.metric["ptx_cp_async"] > 0
    (plain,) = fire(captures, "async_load_path", "k_small_grid")
    assert plain.metric["plain"] == 1 and plain.severity == "low"


def test_shared_memory_occupancy_reads_allocation(captures):
    (f,) = fire(captures, "shared_memory_occupancy", "k_big_smem")
    assert f.metric["shared_bytes"] == captures["k_big_smem"][0].resources["shared_bytes"] > 114 * 1024
    assert f.metric["programs_per_sm"] == 1


def test_pass_changes_per_pass(captures):
    k = captures["k_dot_f16"][0]
    changes = pass_changes(k)
    names = [n for n, _ in changes]
    assert len(changes) == len(k.passes) - 1
    assert all(isinstance(c, int) and c >= 0 for _, c in changes)
    changed = {n: c for n, c in changes if c}
    assert changed.get("TritonGPUAccelerateMatmul", 0) > 0 and changed.get("SoftwarePipeliner.ExpandLoops", 0) > 0
    assert "TritonGPUPipeline" in names
    loops, layouts = pass_structure_changes(k)
    assert "SoftwarePipeliner.LowerLoops" in loops and "TritonGPUAccelerateMatmul" in layouts
    assert "TritonGPUCoalesce" in layouts
    (f,) = fire(captures, "pass_summary", "k_dot_f16")
    assert "TritonGPUAccelerateMatmul" in f.message and "SoftwarePipeliner.LowerLoops" in f.message
    # a pass that changes nothing counts 0, even when it prints differently (internal pipeliner dumps)
    v = dict(pass_changes(captures["k_vadd"][0]))
    assert v.get("SoftwarePipeliner.ExpandLoops", 0) == 0 and v["TritonGPUCoalesce"] > 0
