"""capture_ascend: compiling task kernels with triton-ascend on the CPU (needs the ascend venv)."""

from pathlib import Path

import pytest
from tritondx.errors import BackendUnavailable, SandboxError
from tritondx.tools.npu.adapter_ir import parse_adapter_ir, parse_ttir
from tritondx.tools.npu.capture import capture_ascend

KERNELS = Path(__file__).parent / "kernels"


def test_a2_capture_reaches_the_adapter_stage_and_stops_at_binary(captures):
    cap = captures[("k_gather", "ascend910b")]
    assert cap.arch == "Ascend910B4" and cap.generation == "A2" and not cap.compile_on_910_95
    assert cap.stage_reached == "ttadapter"
    assert "ASCEND_HOME_PATH is not set" in cap.stop_reason
    assert cap.triton_ascend_version.startswith("3.2")
    k = cap.kernel("gather_kernel")
    assert k.stop_stage == "npubin"
    assert set(k.artifacts) >= {"ttir", "ttadapter"}
    for ref in k.artifacts.values():
        assert Path(ref.path).exists() and len(ref.sha256) == 64 and ref.bytes > 0
    assert "func.func @gather_kernel" in k.ir("ttadapter")
    assert "tt.func public @gather_kernel" in k.ir("ttir")


def test_launch_metadata(captures):
    k = captures[("k_gather", "ascend910b")].kernel("gather_kernel")
    assert k.grid == [4, 1, 1] and k.num_programs == 4
    assert k.constexprs == {"BLOCK": 1024}
    assert k.signature["idx_ptr"] == "*i64"
    assert k.num_warps is None and not k.num_warps_explicit
    g = captures[("k_gpu_settings", "ascend910b")].kernel("add_kernel")
    assert g.num_warps == 8 and g.num_warps_explicit and g.num_stages == 3


def test_ir_locations_map_to_the_task_source(captures):
    cap = captures[("k_gather", "ascend910b")]
    k = cap.kernel("gather_kernel")
    src = (KERNELS / "k_gather.py").read_text().splitlines()
    load_line = next(i for i, ln in enumerate(src, 1) if "x = tl.load(x_ptr + idx" in ln)
    adapter = parse_adapter_ir(k.ir("ttadapter"))
    extract = next(o for o in adapter.ops if "DiscreteMemAccess" in o.attrs)
    assert adapter.source_line(extract, cap.task_path) == load_line
    ttir = parse_ttir(k.ir("ttir"))
    loads = ttir.find("tt.load")
    assert load_line in {ttir.source_line(o, cap.task_path) for o in loads}


def test_950_target_compiles_through_the_adapter(captures):
    cap = captures[("k_gather", "ascend950")]
    assert cap.arch == "Ascend910_9589" and cap.compile_on_910_95 and cap.generation == "950"
    assert cap.stage_reached == "ttadapter"
    k = cap.kernel("gather_kernel")
    assert k.stop_stage == "npubin" and k.stop_reason
    assert "DiscreteMemAccess" in k.ir("ttadapter")
    assert cap.target_info.ub_bytes == 248 * 1024


def test_a3_target_compiles_through_the_adapter(captures):
    cap = captures[("k_contiguous", "ascend910_93")]
    assert cap.arch == "Ascend910_9391" and cap.generation == "A3"
    assert cap.stage_reached == "ttadapter" and "ASCEND_HOME_PATH" in cap.stop_reason


def test_autotune_takes_the_first_config_and_repeats_are_deduplicated(captures):
    cap = captures[("k_autotune", "ascend910b")]
    first, second = cap.kernels
    assert first.constexprs == {"BLOCK": 256}
    assert first.autotune["configs"] == 2 and first.autotune["chosen"] == 0
    assert first.grid == [40, 1, 1]                # cdiv(10240, 256)
    assert second.same_as == first.index and first.repeats == 2
    assert len(cap.distinct()) == 1


def test_launch_error_keeps_kernels_captured_before_it(captures):
    cap = captures[("k_launch_error", "ascend910b")]
    assert cap.launch_error.startswith("ValueError: launcher bug")
    assert cap.kernel("copy_kernel").stage_reached == "ttadapter"


def test_unknown_target_and_missing_python(tmp_path):
    with pytest.raises(BackendUnavailable, match="unknown Ascend target"):
        capture_ascend(str(KERNELS / "k_gather.py"), "ascend999", tmp_path / "x")
    with pytest.raises(BackendUnavailable, match="does not exist"):
        capture_ascend(str(KERNELS / "k_gather.py"), "ascend910b", tmp_path / "x", python="/nonexistent/python")


def test_timeout_raises_sandbox_error(ascend_python, tmp_path):
    with pytest.raises(SandboxError, match="took more than"):
        capture_ascend(str(KERNELS / "k_gather.py"), "ascend910b", tmp_path / "t", python=ascend_python,
                       timeout=0.05)
