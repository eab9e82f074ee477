"""One compile for the IR and compiler tiers of the same kernel (tools/evidence/analysis.py): an IR-tier
capture made with the per-pass dumps ahead of the compiler tier is reused by it, the IR tier's findings
and artifacts unchanged; a changed source is compiled again."""

from __future__ import annotations

import shutil
from pathlib import Path

from tritondx.tools.evidence import analysis

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "softmax_three_pass.py"




def _ids(found) -> list[tuple[str, str]]:
    return sorted((f.id, f.message) for f in found)


def test_the_compiler_tier_reuses_a_capture_made_with_its_passes(capture_calls, tmp_path, monkeypatch):
    task = tmp_path / "task.py"
    shutil.copyfile(EXAMPLE, task)
    calls = capture_calls
    plain_dir, ahead_dir = tmp_path / "plain", tmp_path / "ahead"
    ir_plain, art_plain, _ = analysis.analyze_tier("ir", str(task), "cuda:90", plain_dir, 1)
    ir_ahead, art_ahead, note = analysis.analyze_tier("ir", str(task), "cuda:90", ahead_dir, 1, passes_ahead=True)
    assert not note and calls == [False, True]
    # the IR tier sees and lists no pass dump: the same findings, the same artifacts
    assert _ids(ir_ahead) == _ids(ir_plain) and sorted(art_ahead) == sorted(art_plain)
    assert not any("passes" in name for name in art_ahead)
    assert list((ahead_dir / "ir" / "ir_round1").glob("*.passes.txt"))

    comp_reused, art_reused, note = analysis.analyze_tier("compiler", str(task), "cuda:90", ahead_dir, 2)
    assert not note and calls == [False, True], "the compiler tier compiled again"
    comp_own, art_own, _ = analysis.analyze_tier("compiler", str(task), "cuda:90", plain_dir, 2)
    assert calls == [False, True, True]   # no earlier capture with passes there: its own
    assert comp_reused and _ids(comp_reused) == _ids(comp_own)
    assert sorted(art_reused) == sorted(art_own) and any("passes" in name for name in art_reused)
    # its files are its own folder's (the report names them under the tier)
    folder = ahead_dir / "ir" / "compiler_round2"
    assert all(Path(a["path"]).parent == folder for a in art_reused.values())


def test_a_changed_source_is_compiled_again(capture_calls, tmp_path, monkeypatch):
    task = tmp_path / "task.py"
    shutil.copyfile(EXAMPLE, task)
    calls = capture_calls
    analysis.analyze_tier("ir", str(task), "cuda:90", tmp_path, 1, passes_ahead=True)
    assert analysis.reusable_capture(tmp_path / "ir", str(task), "cuda:90") is not None
    assert analysis.reusable_capture(tmp_path / "ir", str(task), "cuda:80") is None
    task.write_text(task.read_text().replace("BLOCK = 256", "BLOCK = 128"))
    assert analysis.reusable_capture(tmp_path / "ir", str(task), "cuda:90") is None
    analysis.analyze_tier("compiler", str(task), "cuda:90", tmp_path, 2)
    assert calls == [True, True]


def test_the_ir_tier_dumps_passes_ahead_only_when_the_compiler_tier_follows(monkeypatch):
    from tritondx.agents import ir_analyst

    class Timed:
        can_time = True

    from tritondx.config import RunConfig
    cfg = RunConfig(backend="interpreter", max_rounds=6)
    state = {"backend": "interpreter", "round": 1}
    assert ir_analyst.compiler_follows(state, "rewriter", cfg)            # an untimed backend escalates every round
    assert not ir_analyst.compiler_follows({**state, "round": 5}, "rewriter", cfg)   # its round is the last one
    assert not ir_analyst.compiler_follows(state, "compiler_expert", RunConfig(stop_after_tier="ir"))
    monkeypatch.setattr(ir_analyst, "backend_of", lambda s, c: Timed())
    assert not ir_analyst.compiler_follows(state, "rewriter", cfg)        # a timed round may stop or stay at the tier
    assert ir_analyst.compiler_follows(state, "compiler_expert", cfg)
