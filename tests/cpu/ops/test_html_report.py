"""report.html for a run and for a batch: self-contained, with its plots, and it renders in headless Chromium."""

import difflib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tritondx.tools.report import html as rh

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "bench" / "results" / "runs_h200_20261129"


def _run_page(tmp_path: Path) -> Path:
    """The page of a real measured run (H200, matmul_no_dot), rendered from its stored report.json."""
    report = json.loads((H200 / "matmul_no_dot" / "report.json").read_text())
    init = (ROOT / "examples" / "matmul_no_dot.py").read_text().splitlines(True)
    best = (H200 / "matmul_no_dot" / "optimized_task.py").read_text().splitlines(True)
    diff = "".join(difflib.unified_diff(init, best, "initial", "optimized"))
    return rh.write_run_html(tmp_path, report, diff)


def _batch_page(tmp_path: Path) -> Path:
    from tritondx.batch_summary import write_summary
    results = []
    for i, (task, sp, rb, tiers) in enumerate([("axpy", 1.6, 0.55, ["triage"]), ("softmax", 2.1, 0.43, ["triage"]),
                                                ("matmul", 19.0, 0.045, ["triage", "profile", "ir"]),
                                                ("layernorm", 1.1, 0.7, ["triage", "profile", "ir", "compiler"])]):
        t0 = 1.0 + i
        results.append({"task": task, "path": f"{task}.py", "exit": 0, "wall_s": 60.0 + i, "status": "done",
                        "kernel_class": "elementwise", "tiers_used": tiers, "rounds": 2, "cost": {"device:jobs": 10.0},
                        "speedup": sp, "initial_ms": t0, "optimized_ms": t0 / sp, "roofline_before": rb,
                        "roofline_after": min(0.95, rb * sp), "torch_eager_ms": t0 / 1.2,
                        "torch_compile_ms": t0 / 1.5, "rewrites_applied": ["launch_config"],
                        "best_by_tier": {"triage": sp, "profile": sp, "ir": sp, "compiler": sp}})
    results.append({"task": "broken", "path": "broken.py", "exit": 1, "wall_s": 3.0, "status": "failed"})
    write_summary(tmp_path, results, {"suite": "bench/suite", "device": "NVIDIA H200", "backend": "cuda",
                                      "torch": "2.11", "triton": "3.6.0", "date": "2026-11-29"})
    return tmp_path / "report.html"


def _self_contained(text: str) -> None:
    assert "<script" not in text and "<link" not in text
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)


def test_run_page_has_evidence_diffs_timings_and_plots(tmp_path):
    page = _run_page(tmp_path).read_text()
    _self_contained(page)
    for pid in ("plot-tiers", "plot-roofline", "plot-speedups"):
        assert f'id="{pid}"' in page
    assert page.count("<svg") >= 3
    assert "18.98x" in page and "mul_sum_dot" in page and "tl.sum(a.to(tl.float32)" in page  # evidence + source
    assert 'class="del"' in page and 'class="add"' in page and "tl.dot(a, b, acc)" in page  # the diff
    assert "204.6" in page and "compile_error" in page  # timings, a rejected candidate


def test_batch_page_has_distribution_roofline_and_tier_plots(tmp_path):
    page = _batch_page(tmp_path).read_text()
    _self_contained(page)
    for pid in ("plot-speedup-dist", "plot-speedup-per-task", "plot-roofline", "plot-tiers", "plot-ablation"):
        assert f'id="{pid}"' in page
    assert "geomean speedup" in page and "runs/matmul/report.html" in page and "failed" in page
    assert (tmp_path / "summary.md").exists() and (tmp_path / "results.json").exists()


def test_pages_have_plots_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setattr(rh, "_mpl", lambda: None)
    page = _run_page(tmp_path).read_text()
    assert page.count("<svg") >= 3 and "<rect" in page
    assert _batch_page(tmp_path).read_text().count("<svg") >= 4


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no chromium (CI installs it: .ci/run)")
@pytest.mark.parametrize("which", ["run", "batch"])
def test_renders_in_headless_chromium(tmp_path, which):
    page = _run_page(tmp_path) if which == "run" else _batch_page(tmp_path)
    shot = tmp_path / f"{which}.png"
    p = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1600",
                        f"--screenshot={shot}", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists(), p.stderr[-2000:]
    assert shot.stat().st_size > 30_000
    import matplotlib.image
    img = matplotlib.image.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1200
    assert img[..., :3].std() > 0.05  # not a blank page
