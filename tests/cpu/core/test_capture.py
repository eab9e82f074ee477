"""IR capture for cuda:90 on CPU, faithful to the JIT's specialization, with source attribution."""

import json

from tritondx.tools.ir.context import load_capture
from tritondx.tools.task.capture_job import capture_ir

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"


def test_capture_matmul_all_stages(tmp_path):
    task = str(EXAMPLES / "matmul_no_dot.py")
    manifest, err = capture_ir(task, tmp_path, "cuda:90", per_pass=False)
    assert manifest, err
    rec = manifest["launches"][0]
    assert rec["kernel"] == "matmul_kernel"
    assert set(rec["stages"]) >= {"ttir", "ttgir", "llir", "ptx", "sass"}
    # strides equal to 1 are specialized as constexprs, exactly as the JIT does
    assert rec["signature"]["stride_ak"] == "constexpr" and rec["signature"]["stride_am"] == "i32"
    assert rec["grid"] == [128, 128, 1]
    assert rec["resources"]["registers"] > 0
    ks = load_capture(tmp_path / "manifest.json", open(task).read(), source_path=task)
    ptx = ks[0].ir("ptx")
    mapped = [ln for ln in ptx.lines if ln.src_line is not None and ln.src_file.endswith("matmul_no_dot.py")]
    assert mapped, "PTX lines must map back to the task source"
    sass = ks[0].ir("sass")
    assert any(ln.src_line for ln in sass.lines)
    assert json.loads((tmp_path / "manifest.json").read_text())["task"].endswith("matmul_no_dot.py")


def test_resource_report_for_every_launch(tmp_path):
    from tritondx.tools.evidence.analysis import analyze_tier
    found, _, note = analyze_tier("ir", str(EXAMPLES / "softmax_three_pass.py"), "cuda:90", tmp_path, 0)
    reports = [f for f in found if f.detector == "resource_report"]
    assert not note and len(reports) == 3  # one per kernel launch
    r = reports[0]
    assert r.metric["registers"] > 0 and r.metric["programs"] == 8192 and 0 < r.metric["occupancy"] <= 1
    assert "registers/thread" in r.message and "occupancy" in r.message
