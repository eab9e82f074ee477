"""The IR capture of the initial kernel started ahead of the IR tier (tools/evidence/ahead.py): the IR tier
waits for it and reuses it instead of compiling the same source again; another best source is compiled
anew; a capture that never completed (no manifest) is never reused."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tritondx.tools.evidence import ahead, analysis
from tritondx.tools.run.phases import Phases, with_node_rest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "softmax_three_pass.py"
TARGET = "cuda:90"


@pytest.fixture
def run(tmp_path):
    task = tmp_path / "task_initial.py"
    shutil.copyfile(EXAMPLE, task)
    yield tmp_path, task
    ahead.settle(tmp_path)
    ahead.forget(tmp_path)




def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_ir_tier_waits_for_the_capture_started_ahead_and_reuses_it(capture_calls, run, monkeypatch):
    run_dir, task = run
    calls = capture_calls
    job = ahead.start(str(task), TARGET, run_dir)
    assert job is not None and not job.done.is_set()      # in flight when the IR tier asks for it
    assert ahead.start(str(task), TARGET, run_dir) is job  # the same source again: no second one
    ph = Phases()
    found, artifacts, note = analysis.analyze_tier("ir", str(task), TARGET, run_dir, 1, phases=ph)
    assert job.done.is_set() and job.folder == run_dir / "ir" / ahead.FOLDER, job.error
    assert not note and found and calls == [], "the IR tier compiled the initial kernel again"
    # its own folder, the IR tier's view (no pass dump listed), the ahead capture's seconds counted once
    assert artifacts and all(Path(a["path"]).parent == run_dir / "ir" / "ir_round1" for a in artifacts.values())
    assert not any("passes" in name for name in artifacts)
    assert ph.seconds[ahead.PHASE] > 0 and "ir_compile" in ph.seconds
    assert ahead.take_seconds(run_dir) == 0.0
    # the compiler tier of the same kernel: no compile either
    comp, comp_art, note = analysis.analyze_tier("compiler", str(task), TARGET, run_dir, 2)
    assert not note and comp and calls == [] and any("passes" in name for name in comp_art)


def test_another_best_source_is_compiled_anew(capture_calls, run, monkeypatch):
    run_dir, task = run
    calls = capture_calls
    best = run_dir / "candidates" / "r1c1.py"
    best.parent.mkdir()
    best.write_text(task.read_text().replace("BLOCK = 256", "BLOCK = 128"))
    assert _sha(best) != _sha(task)
    assert ahead.start(str(task), TARGET, run_dir) is not None
    assert ahead.join(run_dir, str(best), TARGET) is None   # not its source: nothing to wait for
    _, _, note = analysis.analyze_tier("ir", str(best), TARGET, run_dir, 1)
    assert not note and calls == [False]
    assert json.loads((run_dir / "ir" / "ir_round1" / "manifest.json").read_text())["source_sha256"] == _sha(best)
    ahead.settle(run_dir)   # the ahead capture itself was made, and stays the initial kernel's
    assert analysis.reusable_capture(run_dir / "ir", str(task), TARGET) == run_dir / "ir" / ahead.FOLDER


def test_an_incomplete_ahead_capture_is_not_reused(capture_calls, run, monkeypatch):
    run_dir, task = run
    calls = capture_calls

    def dies(folder, manifest):  # the run ends after the job wrote its files, before the manifest counts
        raise OSError("interrupted")
    monkeypatch.setattr(ahead, "complete", dies)
    job = ahead.start(str(task), TARGET, run_dir)
    ahead.settle(run_dir)
    assert job.done.is_set() and job.folder is None and "interrupted" in job.error
    folder = run_dir / "ir" / ahead.FOLDER
    assert (folder / "partial" / "manifest.json").is_file() and list((folder / "partial").glob("*.ttgir"))
    assert not (folder / "manifest.json").exists()
    assert analysis.reusable_capture(run_dir / "ir", str(task), TARGET) is None
    _, _, note = analysis.analyze_tier("ir", str(task), TARGET, run_dir, 1)
    assert not note and calls == [False], "a capture without its manifest was reused"


def test_the_ahead_seconds_overlap_and_are_no_part_of_the_node():
    out = with_node_rest("analysis:ir", 1.0, {"ir_compile": 0.25, ahead.PHASE: 5.0})
    assert out == {"ir_compile": 0.25, ahead.PHASE: 5.0, "analysis:ir": 0.75}


def test_triage_starts_it_only_where_the_ir_tier_reads_the_initial_kernel():
    from tritondx.agents.common import ir_reads_initial
    from tritondx.config import RunConfig

    cfg = RunConfig(backend="interpreter")
    assert ir_reads_initial(cfg, can_time=False)
    assert not ir_reads_initial(cfg, can_time=True)              # a timed round may make a candidate the best
    assert not ir_reads_initial(cfg.model_copy(update={"accept_unmeasured": True}), False)
    assert not ir_reads_initial(cfg.model_copy(update={"interactive": True}), False)
    assert not ir_reads_initial(cfg.model_copy(update={"max_rounds": 1}), False)       # no round after round 1
    assert not ir_reads_initial(cfg.model_copy(update={"stop_after_tier": "profile"}), False)
    assert not ir_reads_initial(cfg.model_copy(update={"mode": "diagnose"}), False)
