"""log.jsonl holds only the project's own events (at info unless -v); terminal lines are short, without ids."""

import json
import logging

import pytest
import structlog

from tritondx.logs import LINE_MAX, setup_logging


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("tritondx").level)
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])
    logging.getLogger("tritondx").setLevel(saved[2])


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_log_file_holds_project_events_only(tmp_path, restore_logging):
    pytest.importorskip("matplotlib")
    log = tmp_path / "log.jsonl"
    setup_logging(log)
    structlog.get_logger("tritondx").bind(node="verifier").info("decided", goto="profiler")
    structlog.get_logger("tritondx.tools.exec.sandbox").debug("job_done", job="verify")
    # what the report's plots do: matplotlib's font lookup logs findfont lines at debug
    import matplotlib
    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.set_title("speedups")
    fig.savefig(io.BytesIO(), format="svg")
    plt.close(fig)
    logging.getLogger("matplotlib.font_manager").debug("findfont: Matching sans-serif")
    logging.getLogger("matplotlib").warning("a real third-party warning")
    events = _events(log)
    assert [e["event"] for e in events] == ["decided", "a real third-party warning"], events
    assert events[0]["node"] == "verifier" and events[1]["level"] == "warning"


def test_verbose_keeps_project_debug_events(tmp_path, restore_logging):
    log = tmp_path / "log.jsonl"
    setup_logging(log, verbose=True)
    structlog.get_logger("tritondx.tools.exec.sandbox").debug("job_done", job="verify")
    logging.getLogger("matplotlib.font_manager").debug("findfont: Matching sans-serif")
    assert [e["event"] for e in _events(log)] == ["job_done"]


def test_progress_lines_are_short_and_without_ids(tmp_path, capsys, restore_logging):
    log = tmp_path / "log.jsonl"
    setup_logging(log)
    tid, cid = "20261201-091353-add_tiny_block-4f2a1c", "1f1ed678-7dbb-6284-8002-657a5664c36a"
    lg = structlog.get_logger("tritondx").bind(node="verifier", thread_id=tid, checkpoint_id=cid, step=3)
    lg.info("round_checked", round=1, passed=["r1c1", "r1c3"], failed=["r1c2 (mismatch)"])
    lg.info("proposed", round=2, candidates=[(f"r2c{i}", "launch_config") for i in range(1, 9)],
            reason="x" * 500)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2
    assert "verifier round 1 round_checked passed=[r1c1, r1c3] failed=[r1c2 (mismatch)]" in lines[0]
    assert all(len(ln) <= LINE_MAX and tid not in ln and cid not in ln for ln in lines), lines
    # the ids stay in the log file
    assert all(e["thread_id"] == tid and e["checkpoint_id"] == cid for e in _events(log))
