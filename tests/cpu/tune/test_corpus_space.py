"""Every corpus task's knobs, instrumented source and a configuration's source are valid Python (static: no task
code runs). Reads the third-party corpus from ../shared/corpus (skipped where it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritondx.tools.tune.space import build, emit, instrument

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
TASKS = sorted(CORPUS.glob("tbg_*.py")) if CORPUS.is_dir() else []


@pytest.mark.skipif(not TASKS, reason="../shared/corpus is not here")
def test_every_corpus_task_has_knobs_and_compiling_sources():
    with_tiles = 0
    for path in TASKS:
        src = path.read_text()
        space = build(src)
        assert space.knobs, f"{path.name}: no knob"
        compile(instrument(src), str(path), "exec")
        cfg = {k.key: (1 if k.how == "scale" else (k.value or 4)) for k in space.knobs if k.kind != "pin"}
        launched = {k.key: (k.value if k.value is not None else 16) for k in space.knobs}
        compile(emit(src, cfg, launched), str(path), "exec")
        with_tiles += any(k.kind == "tile" for k in space.knobs)
    assert with_tiles >= 0.75 * len(TASKS)   # 13 of 34 had no tunable block before tiles were read from use
