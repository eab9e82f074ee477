"""Run one task through the graph: run folder, logging, checkpointer, outputs."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import structlog

from tritondx.config import RunConfig, RunContext
from tritondx.errors import TaskFormatError, TritonDXError
from tritondx.checkpoints import thread_id_for
from tritondx.logs import Heartbeat, setup_logging
from tritondx import IMPORTED_AT
from tritondx.tools.task.spec import load_task

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

RUNS_DIR = Path(os.environ.get("TRITONDX_RUNS", "runs"))


#: the run folder this process works on now (the CLI's interrupt line names it: `tritondx resume FOLDER`)
ACTIVE_RUN: list[str] = []


def set_active_run(folder: Path | str) -> None:
    ACTIVE_RUN[:] = [str(folder)]


# Files whose presence means a folder already holds a run (or the start of one).
RUN_MARKERS = ("run.json", "checkpoints.sqlite", "report.json")


def check_run_settings(cfg: RunConfig) -> RunConfig:
    """A backend without its device, or a target no compiler takes: one line before any folder is made."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.backends.targets import check_target
    get_backend(cfg.backend)
    return cfg.model_copy(update={"target": check_target(cfg.target)})


def new_run_dir(task_path: str, out: str | None) -> Path:
    if out:
        folder = Path(out)
        held = [m for m in RUN_MARKERS if (folder / m).exists()] if folder.is_dir() else []
        if held:  # never write a second run over the first one's checkpoints and report
            raise TritonDXError(f"{folder}: already holds a run ({held[0]}); continue it with "
                                f"`tritondx resume {folder}`, or choose another --out")
        if folder.exists() and not folder.is_dir():
            raise TritonDXError(f"{folder}: exists and is not a folder; choose another --out")
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = RUNS_DIR / f"{stamp}-{Path(task_path).stem}-{uuid.uuid4().hex[:6]}"
    try:  # a read-only or foreign place: one line, nothing made
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise TritonDXError(f"{folder}: cannot write a run folder there ({exc.strerror or exc}); "
                            "choose another --out") from None
    return folder


def open_checkpointer(run_dir: Path) -> BaseCheckpointSaver:
    """SQLite or PostgreSQL checkpoints whose serializer loads plain data and LangGraph's own records only."""
    from tritondx.checkpoints import open_checkpointer as _open
    return _open(run_dir)


# An approval handler: gets one human-interrupt request (agents/approval.py), returns the response.
Approver = Callable[[dict[str, Any]], dict[str, Any]]


def drive(graph, graph_input: Any, config: dict[str, Any], cfg: RunConfig, approver: Approver | None = None,
          started_at: float | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Invoke the graph with the run's settings ``cfg`` and answer its approval interrupts until it ends (its
    report node writes the run's files) or, without an approver, until it pauses. Returns the state values and
    the requests still waiting for an answer. ``started_at``: where this invocation's wall time starts (the
    report's), default now."""
    from tritondx.tools.evidence import ahead
    beat = Heartbeat(thread_id=(config.get("configurable") or {}).get("thread_id"))
    context = RunContext(config=cfg, started_at=started_at or time.time())

    def run(inp: Any, conf: dict[str, Any]) -> None:  # invoke, with the task events feeding the heartbeat
        with beat:
            for ev in graph.stream(inp, conf, context=context, durability="sync", stream_mode="tasks"):
                beat.task_event(ev)

    try:
        run(graph_input, config)
        latest = {"configurable": {"thread_id": config["configurable"]["thread_id"]},
                  "recursion_limit": config.get("recursion_limit", 200)}
        while True:
            snap = graph.get_state(latest)
            waiting = [i.value[0] if isinstance(i.value, list) and i.value else i.value for i in snap.interrupts]
            if not waiting or approver is None:
                if waiting and snap.values.get("run_dir"):   # paused: its background capture ends first
                    ahead.settle(Path(snap.values["run_dir"]))
                return snap.values, waiting
            from langgraph.types import Command
            run(Command(resume=[approver(waiting[0])]), latest)
    except BaseException:
        ahead.settle()  # no background capture outlives the run that started it
        raise


def run_task(task_path: str, cfg: RunConfig, out: str | None = None, verbose: bool = False,
             thread_id: str | None = None, approver: Approver | None = None) -> dict[str, Any]:
    """Optimize or diagnose one task. Raises TritonDXError with a one-line message on bad input."""
    entered = time.time()
    load_task(task_path)  # a clear one-line error before anything is created
    cfg = check_run_settings(cfg)
    before = set(os.listdir(out)) if out and os.path.isdir(out) else None  # None: the folder is ours
    run_dir = new_run_dir(task_path, out)
    set_active_run(run_dir)
    setup_logging(run_dir / "log.jsonl", verbose)
    thread_id = thread_id or thread_id_for(run_dir)
    (run_dir / "run.json").write_text(json.dumps({"task": str(Path(task_path).resolve()), "thread_id": thread_id,
                                                  "config": cfg.model_dump(), "started": time.time()}, indent=1))
    if cfg.verifier != "judge":   # a test setting (tools/verify/interface.py): said in the log, report and result
        structlog.get_logger("runner").warning("verifier_not_the_judge", verifier=cfg.verifier,
                                               note="nothing this run makes is checked")
    from tritondx.graph import builder   # the graph's imports (torch among them) after the checks above
    saver = open_checkpointer(run_dir)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
    state_in = {"task_path": str(Path(task_path).resolve()), "run_dir": str(run_dir.resolve())}
    unusable = False
    try:
        # the CLI's imports, the task check, the checkpointer: part of the wall time, in the "startup" phase
        # (tools/run/phases.py report_ledger: everything outside the nodes)
        final, waiting = drive(graph, state_in, config, cfg, approver, started_at=run_started(entered))
    except TaskFormatError:  # the probe found the task unusable (triage never finished): no run to keep
        unusable = not graph.get_state(config).values.get("probe")
        raise
    finally:
        saver.conn.close()
        if unusable:
            discard_run_dir(run_dir, before)
    if waiting:  # paused for a person (no approver here): `tritondx resume RUN` picks it up
        return {"status": "paused", "run_dir": str(run_dir), "waiting": waiting}
    return finish(run_dir)


_first_run = [True]


def run_started(entered: float) -> float:
    """When this run started: the package's import for the first run of a process (a CLI run: its
    imports count), else when ``run_task`` was entered (a later run in the same process)."""
    if _first_run[0]:
        _first_run[0] = False
        return min(IMPORTED_AT, entered)
    return entered


def discard_run_dir(run_dir: Path, before: set[str] | None) -> None:
    """Remove what this run wrote into ``run_dir``: the whole folder when it made it, else only the entries
    that were not there before (an existing, empty ``--out`` folder stays, empty). Bad input leaves no
    half-made run behind, the same as a task rejected before the run folder is made."""
    import shutil
    root = logging.getLogger()
    for h in list(root.handlers):  # stop writing log.jsonl before it goes
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename).resolve().parent == run_dir.resolve():
            root.removeHandler(h)
            h.close()
    if before is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    for item in run_dir.iterdir():
        if item.name not in before:
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)


def finish(run_dir: Path) -> dict[str, Any]:
    """The report the graph's report node wrote, with the run folder."""
    report = json.loads((run_dir / "report.json").read_text())
    report["run_dir"] = str(run_dir)
    return report
