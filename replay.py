"""Runs after the fact: list them, walk a run's checkpoints, show the state at one, resume a paused run,
replay from a checkpoint, or fork a new run from one with changed settings.

Every run folder holds ``run.json`` (task, thread_id, config) and ``checkpoints.sqlite`` (LangGraph's
SqliteSaver with the strict serializer of checkpoints.py), or ``checkpoints.json`` naming the PostgreSQL
database that holds its checkpoints (``--checkpoint-url``); the thread id is the run folder's name (plus a
random suffix in PostgreSQL, which many runs share).

- replay: ``invoke(None, {thread_id, checkpoint_id})`` re-executes the graph from that checkpoint in the
  same thread (a new branch of its history) and rewrites the run folder's outputs;
- fork: a new run folder and thread; ``update_state(Command(goto=next, update=state with overrides),
  as_node=<node that wrote the checkpoint>)`` seeds it with the state at that checkpoint (files the state
  names are copied and their paths rewritten), then the new thread runs.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from langgraph.types import Command

from tritondx.errors import TritonDXError
from tritondx.tools.records.evidence import TIERS

_NOT_COPIED = {"checkpoints.sqlite", "checkpoints.sqlite-wal", "checkpoints.sqlite-shm", "checkpoints.json",
               "checkpoints.json.tmp", "log.jsonl", "run.json",
               "report.json", "report.md", "report.html", "optimized_task.py"}


def runs_dir() -> Path:
    from tritondx.runner import RUNS_DIR
    return RUNS_DIR


def resolve_run(run: str) -> Path:
    """A run folder path, or a run id (folder name) under the runs directory."""
    places = list(dict.fromkeys([Path(run), runs_dir() / run]))
    for cand in places:
        if (cand / "run.json").exists():
            return cand.resolve()
    raise TritonDXError(f"{run}: no run folder (looked for run.json in {' and '.join(map(str, places))})")


def load_run(run_dir: Path) -> dict[str, Any]:
    meta = json.loads((run_dir / "run.json").read_text())
    meta.setdefault("thread_id", run_dir.name)
    return meta


class Run:
    """A run folder with its compiled graph on its checkpoint database (use as a context manager)."""

    def __init__(self, run: str | Path, readonly: bool = False):
        from tritondx.checkpoints import open_checkpointer
        from tritondx.graph import builder
        self.dir = resolve_run(str(run))
        if not readonly and not os.access(self.dir, os.W_OK):
            raise TritonDXError(f"{self.dir}: the run folder is read-only; `tritondx replay {self.dir} --checkpoint ID "
                                "--fork --out NEW` continues it in a new folder")
        self.meta = load_run(self.dir)
        self.thread_id = self.meta["thread_id"]
        self.saver = open_checkpointer(self.dir, readonly=readonly)
        self.graph = builder.compile(checkpointer=self.saver)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.saver.conn.close()

    def settings(self):
        """The run's settings (``run.json``): what its graph's nodes get as runtime context when it goes on."""
        from tritondx.config import RunConfig
        return RunConfig(**(self.meta.get("config") or {}))

    def config(self, checkpoint_id: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"thread_id": self.thread_id}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf, "recursion_limit": 200}

    def snapshots(self) -> list:
        """Newest first, as LangGraph returns them."""
        return list(self.graph.get_state_history(self.config()))

    def find(self, checkpoint: str | None):
        snaps = self.snapshots()
        if not snaps:
            raise TritonDXError(f"{self.dir}: no checkpoints")
        if checkpoint in (None, "", "latest"):
            return snaps[0]
        hits = [s for s in snaps if s.config["configurable"]["checkpoint_id"] == checkpoint]
        hits = hits or [s for s in snaps if s.config["configurable"]["checkpoint_id"].startswith(checkpoint)]
        if len(hits) != 1:
            raise TritonDXError(f"{self.dir.name}: checkpoint {checkpoint!r} "
                                f"{'is ambiguous' if hits else 'not found'} (see `tritondx history`)")
        return hits[0]

    def writers(self) -> dict[str, str]:
        """checkpoint id -> the node whose writes produced it (its parent's next task)."""
        snaps = self.snapshots()
        by_id = {s.config["configurable"]["checkpoint_id"]: s for s in snaps}
        out = {}
        for s in snaps:
            cid = s.config["configurable"]["checkpoint_id"]
            parent = s.parent_config and by_id.get(s.parent_config["configurable"]["checkpoint_id"])
            src = (s.metadata or {}).get("source")
            if src == "input":
                out[cid] = "(input)"
            elif src == "fork":  # LangGraph's copy of an earlier checkpoint: `tritondx replay` in this thread
                out[cid] = "(replay)"
            elif src == "update":  # the seed of a `replay --fork` run; otherwise a state update
                out[cid] = "(fork)" if self.meta.get("forked_from") else "(update)"
            else:
                out[cid] = ",".join(parent.next) if parent is not None and parent.next else "?"
        return out


def highest_tier(values: dict[str, Any]) -> str:
    done = [t for t in values.get("tiers_done", []) if t in TIERS]
    return max(done, key=TIERS.index) if done else "-"


def _speed(best: dict[str, Any]) -> str:
    """The best-so-far's speedup as every view says it: a ratio only where it was timed, else "not measured"
    (the initial kernel untimed is not "1.00x": nothing was measured)."""
    if not best:
        return "-"
    if best.get("speedup") and (best.get("measured") or best.get("median_ms")):
        return f"{best['speedup']:.2f}x"
    return "not measured"


def run_status(run_dir: Path) -> dict[str, Any]:
    meta = load_run(run_dir)
    row = {"folder": run_dir.name, "task": Path(meta.get("task", "?")).stem, "status": "?", "best": "-",
           "speedup": "-", "forked_from": (meta.get("forked_from") or {}).get("run")}
    rep = run_dir / "report.json"
    if rep.exists():
        r = json.loads(rep.read_text())
        b = r.get("best") or {}
        row.update(task=r.get("task") or row["task"], status=r.get("status") or "done", best=b.get("id", "-"),
                   speedup=f"{r['speedup']:.2f}x" if r.get("speedup") else
                   ("not measured" if r.get("mode") != "diagnose" else "-"))
    from tritondx.checkpoints import has_store
    if has_store(run_dir):
        try:
            with Run(run_dir, readonly=True) as run:
                snap = run.graph.get_state(run.config())
        except Exception as exc:  # a damaged or foreign database: say so in the listing
            row["status"] = f"unreadable ({type(exc).__name__})"
            return row
        if snap.interrupts:
            row["status"] = "paused (awaiting approval)"
        elif snap.next:
            row["status"] = "incomplete (resume to continue)"
        elif not rep.exists():
            row["status"] = snap.values.get("status") or "empty"
        if row["best"] == "-" and snap.values.get("best"):
            row["best"] = snap.values["best"].get("id", "-")
            row["speedup"] = _speed(snap.values["best"])
    return row


def list_runs(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every run folder under ``folder``, and the runs of each batch folder there (``<batch>/runs/<task>``,
    listed by that path, which `tritondx resume` and the other verbs take as a run id)."""
    folder = folder or runs_dir()
    if not folder.is_dir():
        return []
    rows = []
    for d in sorted(folder.iterdir()):
        if (d / "run.json").exists():
            rows.append(run_status(d))
            continue
        inner = d if d.name == "runs" else d / "runs"   # a batch folder, or the runs folder of the one listed
        if not d.is_dir() or not inner.is_dir():
            continue
        for sub in sorted(inner.iterdir()):
            if (sub / "run.json").exists():
                row = run_status(sub)
                row["folder"] = str(sub.relative_to(folder))
                rows.append(row)
    return rows


def history(run: str | Path) -> list[dict[str, Any]]:
    """Oldest first: step, checkpoint id, writer node, highest tier so far, best so far."""
    with Run(run, readonly=True) as r:
        writers = r.writers()
        rows = []
        for s in reversed(r.snapshots()):
            cid = s.config["configurable"]["checkpoint_id"]
            best = s.values.get("best") or {}
            rows.append({"step": (s.metadata or {}).get("step"), "checkpoint_id": cid, "node": writers.get(cid),
                         "tier": highest_tier(s.values), "round": s.values.get("round", 0),
                         "best": best.get("id", "-"), "speedup": _speed(best), "next": ",".join(s.next) or "END",
                         "waiting": len(s.interrupts)})
        return rows


def show(run: str | Path, checkpoint: str | None) -> dict[str, Any]:
    with Run(run, readonly=True) as r:
        s = r.find(checkpoint)
        cid = s.config["configurable"]["checkpoint_id"]
        return {"checkpoint_id": cid, "step": (s.metadata or {}).get("step"), "node": r.writers().get(cid),
                "next": list(s.next), "values": s.values,
                "waiting": [i.value for i in s.interrupts]}


def format_state(info: dict[str, Any]) -> str:
    v = info["values"]
    verifs = {x.get("candidate_id", x["id"]): x for x in v.get("verifications", []) if ":" not in x["id"]}
    meas = {m["id"]: m for m in v.get("measurements", [])}
    out = [f"checkpoint {info['checkpoint_id']} (step {info['step']}, written by {info['node']}; "
           f"next: {', '.join(info['next']) or 'END'})",
           f"task: {v.get('task_name')} ({v.get('kernel_class')}) backend={v.get('backend')} target={v.get('target')}",
           f"status: {v.get('status')}; round {v.get('round', 0)}; tiers done: {', '.join(v.get('tiers_done', []))}; "
           f"highest tier: {highest_tier(v)}"]
    best = v.get("best") or {}
    out.append(f"best: {best.get('id', '-')} ({best.get('family', 'initial')}) speedup {_speed(best)}")
    if v.get("human_feedback"):
        out.append(f"human feedback (for the next rewrite): {v['human_feedback']}")
    out += ["", f"evidence ({len(v.get('findings', []))} findings):"]
    for tier in TIERS:
        for f in [f for f in v.get("findings", []) if f.get("tier") == tier]:
            where = f" [line {f['source_line']}: {f['source_text']}]" if f.get("source_line") else ""
            out.append(f"  [{tier}/{f.get('stage')}] {f.get('detector')}: {f.get('message')}{where}")
            if f.get("ir_line"):
                out.append(f"      IR: {f['ir_line'][:150]}")
    out += ["", f"candidates ({len(v.get('candidates', []))}); pending: {', '.join(v.get('pending') or []) or '-'}:"]
    for c in v.get("candidates", []):
        ver = verifs.get(c["id"])
        st = "pending" if ver is None else "passed" if ver.get("passed") else f"rejected ({ver.get('klass')})"
        m = meas.get(c["id"])
        t = f", {m['median_ms'] * 1e3:.1f} us, {m['speedup']:.2f}x" if m else ""
        out.append(f"  {c['id']} round {c['round']} [{c['tier']}] {c['family']} {c.get('params') or ''}: {st}{t}"
                   f"{' (edited by a person)' if c.get('origin') == 'human-edit' else ''}")
    if v.get("measurements"):
        out += ["", "measurements:"]
        for m in v["measurements"]:
            out.append(f"  {m['id']}: {m['median_ms'] * 1e3:.1f} us, speedup {m['speedup']:.2f}x, "
                       f"{(m.get('roofline_fraction') or 0):.0%} of roofline")
    out += ["", "decisions:"]
    for d in v.get("decisions", []):
        out.append(f"  {d.get('node')}{' round ' + str(d['round']) if 'round' in d else ''}: "
                   f"{d.get('decision')} - {d.get('reason')}")
    for w in info.get("waiting", []):
        req = w[0] if isinstance(w, list) and w else w
        out += ["", f"waiting for a person: {req.get('action_request', {}).get('action')} "
                    f"{req.get('action_request', {}).get('args', {}).get('candidate')}"]
    return "\n".join(out)


def _finish(run_dir: Path, final: dict[str, Any], waiting: list, t0: float) -> dict[str, Any]:
    """What a resumed, replayed or forked run came to: paused, empty, or the report its report node wrote
    (written here from the state for a run that ended before the graph had a report node)."""
    from tritondx.runner import finish
    if waiting:
        return {"status": "paused", "run_dir": str(run_dir), "waiting": waiting}
    if not final.get("task_name"):
        return {"status": "empty", "run_dir": str(run_dir)}
    if not (run_dir / "report.json").exists():
        from tritondx.agents.common import TIER_NODE
        from tritondx.tools.report.writer import write_outputs
        from tritondx.tools.rewrite.expert import CATALOG
        settings = load_run(run_dir).get("config") or {}
        write_outputs(run_dir, {**final, "config": settings}, time.time() - t0, tuple(TIER_NODE.values()),
                      catalog=frozenset(CATALOG))
    return finish(run_dir)


def resume(run: str | Path, approver=None, verbose: bool = False) -> dict[str, Any]:
    """Continue a paused (or interrupted) run from its latest checkpoint."""
    from tritondx.logs import setup_logging
    from tritondx.runner import drive, set_active_run
    t0 = time.time()
    with Run(run, readonly=True) as r:
        snap = r.graph.get_state(r.config())
        if not snap.interrupts and not snap.next and (r.dir / "report.json").exists():
            # a finished run: nothing to do, and its report and log stay as they are
            return {"status": "finished", "run_dir": str(r.dir), "best": (snap.values.get("best") or {}).get("id")}
    with Run(run) as r:
        snap = r.graph.get_state(r.config())
        set_active_run(r.dir)
        setup_logging(r.dir / "log.jsonl", verbose)
        if snap.interrupts:
            if approver is None:
                return {"status": "paused", "run_dir": str(r.dir), "waiting": [i.value for i in snap.interrupts]}
            req = snap.interrupts[0].value
            graph_input: Any = Command(resume=[approver(req[0] if isinstance(req, list) and req else req)])
        elif snap.next:
            graph_input = None
        else:
            return _finish(r.dir, snap.values, [], t0)
        final, waiting = drive(r.graph, graph_input, r.config(), r.settings(), approver, started_at=t0)
        return _finish(r.dir, final, waiting, t0)


def replay(run: str | Path, checkpoint: str, approver=None, verbose: bool = False) -> dict[str, Any]:
    """Re-execute from a checkpoint in the same thread (input None); the run folder's outputs are rewritten."""
    from tritondx.logs import setup_logging
    from tritondx.runner import drive, set_active_run
    t0 = time.time()
    with Run(run) as r:
        set_active_run(r.dir)
        setup_logging(r.dir / "log.jsonl", verbose)
        snap = r.find(checkpoint)
        cid = snap.config["configurable"]["checkpoint_id"]
        if not snap.next:
            raise TritonDXError(f"checkpoint {cid} is the end of the run: nothing to replay "
                                "(pick an earlier one, or --fork with --tier)")
        final, waiting = drive(r.graph, None, r.config(cid), r.settings(), approver, started_at=t0)
        out = _finish(r.dir, final, waiting, t0)
        out["replayed_from"] = cid
        return out


def _rewrite_paths(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old):] if value == old or value.startswith(old + "/") else value
    if isinstance(value, list):
        return [_rewrite_paths(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite_paths(v, old, new) for k, v in value.items()}
    return value


def _copy_writable(src: Path, dest: Path) -> None:
    """Copy a file or folder of the source run into the fork, writable by its owner whatever the
    source's modes (a read-only archive: the fork's nodes write candidates and IR there)."""
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)
    for p in [dest, *(dest.rglob("*") if dest.is_dir() else [])]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


def fork(run: str | Path, checkpoint: str, out: str | None = None, backend: str | None = None,
         stop_after_tier: str | None = None, tier: str | None = None, max_rounds: int | None = None,
         approver=None, verbose: bool = False) -> dict[str, Any]:
    """Branch a new run (new folder, new thread) from a checkpoint, with overrides, and run it."""
    from tritondx.agents.common import TIER_NODE
    from tritondx.config import RunConfig
    from tritondx.graph import builder
    from tritondx.checkpoints import open_checkpointer, store_url, thread_id_for
    from tritondx.logs import setup_logging
    from tritondx.runner import drive, new_run_dir, set_active_run
    from tritondx.tools.backends.registry import get_backend
    for t in (stop_after_tier, tier):
        if t is not None and t not in TIERS:
            raise TritonDXError(f"unknown tier {t!r}; one of {', '.join(TIERS)}")
    t0 = time.time()
    with Run(run, readonly=True) as r:
        snap = r.find(checkpoint)
        cid = snap.config["configurable"]["checkpoint_id"]
        writer = r.writers().get(cid)
        values = dict(snap.values)
        meta = dict(r.meta)
        src_dir = r.dir
        src_url = store_url(src_dir)  # a fork of a PostgreSQL run keeps its checkpoints there too
    overrides = {k: v for k, v in {"backend": backend, "stop_after_tier": stop_after_tier,
                                   "max_rounds": max_rounds}.items() if v is not None}
    cfg = RunConfig(**{**(meta.get("config") or {}), **overrides})
    if backend is not None:
        get_backend(backend)  # one line, before the new folder is made
    goto = [TIER_NODE[tier]] if tier else list(snap.next)
    if not goto:
        raise TritonDXError(f"checkpoint {cid} is the end of the run: pass --tier to force a tier, "
                            "or fork from an earlier checkpoint")
    new_dir = new_run_dir(meta["task"], out)
    set_active_run(new_dir)
    setup_logging(new_dir / "log.jsonl", verbose)
    for item in src_dir.iterdir():  # the files the state names: task copy, candidates, artifacts
        if item.name in _NOT_COPIED or item.resolve() == new_dir.resolve():
            continue
        _copy_writable(item, new_dir / item.name)
    # the state's paths name the folder the run was made in; a copied or moved run folder (an archive)
    # sits elsewhere now: both point into the fork
    for old_root in {str(values.get("run_dir") or src_dir.resolve()), str(src_dir.resolve())}:
        values = _rewrite_paths(values, old_root.rstrip("/"), str(new_dir.resolve()))
    values.pop("config", None)   # a checkpoint of a run from before the settings left the state
    values["run_dir"] = str(new_dir.resolve())
    if backend is not None:
        values["backend"] = get_backend(backend).name
    if values.get("status") in ("done", "diagnosed"):
        values["status"] = "running"
    thread_id = thread_id_for(new_dir, src_url)
    (new_dir / "run.json").write_text(json.dumps({
        "task": meta["task"], "thread_id": thread_id, "config": cfg.model_dump(), "started": time.time(),
        "forked_from": {"run": str(src_dir), "thread_id": meta["thread_id"], "checkpoint_id": cid,
                        "overrides": {**overrides, **({"tier": tier} if tier else {})}}}, indent=1))
    saver = open_checkpointer(new_dir, src_url)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
    try:
        if writer in builder.nodes:
            graph.update_state(config, Command(goto=goto, update=values), as_node=writer)
            final, waiting = drive(graph, None, config, cfg, approver, started_at=t0)
        else:  # the input checkpoint (or the one right after it): start over with the overrides
            state_in = {"task_path": meta["task"], "run_dir": str(new_dir.resolve())}
            final, waiting = drive(graph, state_in, config, cfg, approver, started_at=t0)
    finally:
        saver.conn.close()
    res = _finish(new_dir, final, waiting, t0)
    res.update(forked_from=cid, run_dir=str(new_dir))
    return res
