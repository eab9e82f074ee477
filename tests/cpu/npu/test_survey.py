"""survey(): capture + detectors over task files, written as JSON and markdown (needs the ascend venv)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "npu_survey.py"
_spec = importlib.util.spec_from_file_location("npu_survey", SCRIPT)
npu_survey = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(npu_survey)
adapter_verdict, survey = npu_survey.adapter_verdict, npu_survey.survey

KERNELS = Path(__file__).parent / "kernels"


def test_survey_writes_kernels_stages_and_detector_lines(ascend_python, tmp_path):
    tasks = [KERNELS / "k_gather.py", KERNELS / "k_launch_error.py"]
    doc = survey(tasks, "ascend910b", tmp_path / "out", work_dir=tmp_path / "work", timeout=240,
                 python=ascend_python)
    on_disk = json.loads((tmp_path / "out" / "survey_ascend910b.json").read_text())
    assert on_disk["tasks"] == json.loads(json.dumps(doc["tasks"]))
    gather, launch_err = doc["tasks"]

    assert gather["error"] is None and gather["adapter"] == "yes"
    (k,) = gather["kernels"]
    assert k["kernel"] == "gather_kernel" and k["stage_reached"] == "ttadapter" and k["stop_stage"] == "npubin"
    assert "ASCEND_HOME_PATH is not set" in k["stop_reason"]
    assert "ascend_discrete_scalar_loop" in gather["detectors"]
    (f,) = [f for f in gather["findings"] if f["detector"] == "ascend_discrete_scalar_loop"]
    src = (KERNELS / "k_gather.py").read_text().splitlines()
    assert f["source_line"] and f["source_text"] == src[f["source_line"] - 1].strip()

    assert launch_err["adapter"] == "partial" and "launcher bug" in launch_err["launch_error"]
    assert doc["summary"]["adapter"] == {"yes": 1, "partial": 1}

    md = (tmp_path / "out" / "survey_ascend910b.md").read_text()
    assert "| k_gather | gather_kernel | yes | ttadapter |" in md
    assert f"gather_kernel:{f['source_line']}" in md and "launcher bug" in md
    assert adapter_verdict([], None, "SandboxError: boom") == "no"
