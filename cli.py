"""The ``tritondx`` command line."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer

from tritondx.errors import TritonDXError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Make slow Triton kernels fast, and explain why they were slow.")
_debug = {"on": False}


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="show tracebacks on errors")) -> None:
    _debug["on"] = debug
    from tritondx.logs import setup_logging
    setup_logging(None)  # every verb: the project's events at info, short lines, secrets redacted (logs.py)


_URL_HELP = ("checkpoints in this PostgreSQL database (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB; "
             "default: checkpoints.sqlite in the run folder). The password is never printed or stored: "
             "prefer $TRITONDX_CHECKPOINT_URL or PGPASSWORD/~/.pgpass to the command line")


def _url_option():
    return typer.Option(None, "--checkpoint-url", envvar="TRITONDX_CHECKPOINT_URL", help=_URL_HELP,
                        show_envvar=True, show_default=False)


def _use_checkpoint_url(url: Optional[str]) -> Optional[str]:
    """Validate the URL, register its password with the redactor and hand it to checkpoints.py (and to
    child processes) through the environment."""
    import os

    from tritondx.checkpoints import URL_ENV, check_url
    url = check_url(url)
    if url:
        os.environ[URL_ENV] = url
    return url


def _thread_id(out: Optional[str], url: Optional[str]) -> Optional[str]:
    """With PostgreSQL, a run folder given by --out gets a unique thread id (one database, many batches)."""
    if not url or not out:
        return None
    from tritondx.checkpoints import thread_id_for
    return thread_id_for(out, url)


def _config(mode: str, **kw):
    from tritondx.config import RunConfig
    return RunConfig.from_env(mode=mode, **kw)


def _print_summary(report: dict, out_dir: str) -> None:
    b = report["best"]
    typer.echo(f"task: {report['task']} ({report['kernel_class']}) backend={report['backend']} "
               f"target={report['target']}")
    typer.echo(f"tiers used: {', '.join(report['tiers_used'])}; rounds: {report['rounds']}; "
               f"findings: {len(report['findings'])}")
    if report["mode"] == "diagnose":
        for f in report["findings"]:
            where = f" [line {f['source_line']}: {f['source_text']}]" if f.get("source_line") else ""
            typer.echo(f"  [{f['tier']}/{f['stage']}] {f['detector']}"
                       f"{' ' + f['kernel'] if f.get('kernel') else ''}: {f['message']}{where}")
            if f.get("ir_line"):
                typer.echo(f"      IR: {f['ir_line'][:150]}")
    elif report["speed"] == "measured":
        typer.echo(f"best: {b.get('id')} ({b.get('family', 'initial')}) speedup {report['speedup']:.2f}x "
                   f"({(b.get('roofline_fraction') or 0):.0%} of roofline)")
    elif report.get("verifier") == "noop" and b.get("id") not in (None, "initial"):
        typer.echo(f"best: {b.get('id')} ({b.get('family', 'initial')}) NOT VERIFIED (no-op verifier); "
                   "speed not measured")
    else:
        typer.echo(f"best: {b.get('id')} ({b.get('family', 'initial')}) verified correct; speed not measured")
    if report.get("verifier") == "noop":
        typer.echo("verifier: no-op (TRITONDX_VERIFIER=noop): no candidate of this run was checked")
    typer.echo(f"run folder: {out_dir}")


@app.command()
def optimize(
    task: str = typer.Argument(..., help="task file (see README: task format)"),
    backend: str = typer.Option("auto", help="auto, interpreter, cuda or npu"),
    target: Optional[str] = typer.Option(None, help="IR target, e.g. cuda:90, ascend950"),
    out: Optional[str] = typer.Option(None, help="run folder (default runs/<run-id>)"),
    max_rounds: Optional[int] = typer.Option(None, help="rewrite rounds in all"),
    llm: bool = typer.Option(False, "--llm", help="ask an OpenAI-compatible model first"),
    llm_base_url: Optional[str] = typer.Option(None, help="model endpoint (or OPENAI_BASE_URL)"),
    llm_model: Optional[str] = typer.Option(None, help="model name (or TRITONDX_LLM_MODEL)"),
    all_tiers: bool = typer.Option(False, help="gather every tier before the first rewrite"),
    stop_after_tier: Optional[str] = typer.Option(None, help="never escalate past this tier"),
    baselines: bool = typer.Option(False, help="also time torch eager and torch.compile"),
    interactive: bool = typer.Option(False, "--interactive", "-i",
                                     help="approve, reject, edit or comment on each rewrite, and the final kernel"),
    accept_unmeasured: bool = typer.Option(False, "--accept-unmeasured",
                                           help="without timing (CPU), take the first verified candidate as the "
                                                "result instead of the initial kernel"),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """Optimize a task: diagnose, rewrite, verify; write the best kernel and the evidence trail."""
    from tritondx.tools.task.spec import load_task
    load_task(task)  # a malformed file is answered before the heavy imports below
    url = _use_checkpoint_url(checkpoint_url)
    from tritondx.runner import run_task
    cfg = _config("optimize", backend=backend, target=target, max_rounds=max_rounds, llm=llm,
                  llm_base_url=llm_base_url, llm_model=llm_model, all_tiers=all_tiers,
                  stop_after_tier=stop_after_tier, baselines=baselines, interactive=interactive or None,
                  accept_unmeasured=accept_unmeasured or None)
    report = run_task(task, cfg, out=out, verbose=verbose, approver=_approver() if cfg.interactive else None,
                      thread_id=_thread_id(out, url))
    _print_result(report, out)


def _approver():
    from tritondx.hitl import terminal_approver
    return terminal_approver()


def _print_result(report: dict, out: Optional[str] = None) -> None:
    if report.get("status") == "paused":
        typer.echo(f"paused, waiting for approval; continue with: tritondx resume {report['run_dir']}")
    elif report.get("status") == "empty":
        typer.echo(f"run {report['run_dir']}: nothing ran")
    elif report.get("status") == "finished":
        typer.echo(f"run {report['run_dir']} is finished (best {report.get('best') or '-'}): nothing to resume; "
                   "its report is unchanged")
    else:
        _print_summary(report, report.get("run_dir", out or ""))


@app.command()
def resume(
    run: str = typer.Argument(..., help="run folder, or run id under runs/"),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """Continue a paused or interrupted run from its last checkpoint (answers pending approvals here)."""
    _use_checkpoint_url(checkpoint_url)
    from tritondx.replay import resume as _resume
    _print_result(_resume(run, approver=_approver(), verbose=verbose))


@app.command()
def runs(folder: Optional[str] = typer.Option(None, "--dir", help="runs folder (default runs/ or $TRITONDX_RUNS)"),
         checkpoint_url: Optional[str] = _url_option()) -> None:
    """List run folders: task, status, best candidate and speedup."""
    _use_checkpoint_url(checkpoint_url)
    from pathlib import Path

    from tritondx.replay import list_runs
    rows = list_runs(Path(folder) if folder else None)
    if not rows:
        typer.echo("no runs")
        return
    typer.echo(f"{'folder':<44} {'task':<24} {'status':<30} {'best':<8} speedup")
    for r in rows:
        fork = f"  (fork of {__import__('pathlib').Path(r['forked_from']).name})" if r.get("forked_from") else ""
        typer.echo(f"{r['folder']:<44} {str(r['task']):<24} {r['status']:<30} {str(r['best']):<8} "
                   f"{r['speedup']}{fork}")


@app.command()
def history(run: str = typer.Argument(..., help="run folder, or run id under runs/"),
            checkpoint_url: Optional[str] = _url_option()) -> None:
    """The checkpoints of a run, oldest first: step, node that wrote it, highest tier, best so far."""
    _use_checkpoint_url(checkpoint_url)
    from tritondx.replay import history as _history
    rows = _history(run)  # an error is its one line, with no header before it
    typer.echo(f"{'step':>4}  {'checkpoint':<38} {'node':<16} {'tier':<9} {'round':>5}  {'best':<8} "
               f"{'speedup':<12} next")
    for r in rows:
        wait = ("" if not r["waiting"] else "  [waiting for approval]" if r is rows[-1] else "  (asked a person)")
        typer.echo(f"{r['step']:>4}  {r['checkpoint_id']:<38} {r['node']:<16} {r['tier']:<9} {r['round']:>5}  "
                   f"{r['best']:<8} {r['speedup']:<12} {r['next']}{wait}")


@app.command()
def show(
    run: str = typer.Argument(..., help="run folder, or run id under runs/"),
    checkpoint: Optional[str] = typer.Option(None, "--checkpoint", "-c", help="checkpoint id or unique prefix "
                                             "(default: latest)"),
    as_json: bool = typer.Option(False, "--json", help="the raw state values as JSON"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """The state at one checkpoint: evidence, candidates, measurements, decisions."""
    _use_checkpoint_url(checkpoint_url)
    import json

    from tritondx.replay import format_state, show as _show
    info = _show(run, checkpoint)
    typer.echo(json.dumps(info, indent=1, default=str) if as_json else format_state(info))


@app.command()
def replay(
    run: str = typer.Argument(..., help="run folder, or run id under runs/"),
    checkpoint: str = typer.Option(..., "--checkpoint", "-c", help="checkpoint id or unique prefix"),
    fork: bool = typer.Option(False, "--fork", help="branch a new run (new folder and thread) from the checkpoint"),
    backend: Optional[str] = typer.Option(None, help="--fork: another backend"),
    stop_after_tier: Optional[str] = typer.Option(None, help="--fork: never escalate past this tier"),
    tier: Optional[str] = typer.Option(None, help="--fork: run this tier's agent next (triage, profile, ir, "
                                                  "compiler)"),
    max_rounds: Optional[int] = typer.Option(None, help="--fork: rewrite rounds in all"),
    out: Optional[str] = typer.Option(None, help="--fork: the new run folder (default runs/<run-id>)"),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """Re-execute a run from a checkpoint; with --fork, branch a new run from it with changed settings."""
    _use_checkpoint_url(checkpoint_url)
    from tritondx.replay import fork as _fork, load_run, resolve_run, replay as _replay
    interactive = bool(load_run(resolve_run(run)).get("config", {}).get("interactive"))
    approver = _approver() if interactive else None
    if fork:
        report = _fork(run, checkpoint, out=out, backend=backend, stop_after_tier=stop_after_tier, tier=tier,
                       max_rounds=max_rounds, approver=approver, verbose=verbose)
        typer.echo(f"forked from checkpoint {report['forked_from']}")
    else:
        if any(x is not None for x in (backend, stop_after_tier, tier, max_rounds, out)):
            raise typer.BadParameter("--backend, --stop-after-tier, --tier, --max-rounds and --out need --fork")
        report = _replay(run, checkpoint, approver=approver, verbose=verbose)
        typer.echo(f"replayed from checkpoint {report.get('replayed_from')}")
    _print_result(report)


@app.command()
def diagnose(
    task: str = typer.Argument(..., help="task file"),
    backend: str = typer.Option("auto", help="auto, interpreter, cuda or npu"),
    target: Optional[str] = typer.Option(None, help="IR target, e.g. cuda:90, ascend950, ascend910b"),
    out: Optional[str] = typer.Option(None, help="run folder (default runs/<run-id>)"),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """Run every evidence tier without rewriting; print findings with IR and source lines."""
    url = _use_checkpoint_url(checkpoint_url)
    from tritondx.runner import run_task
    cfg = _config("diagnose", backend=backend, target=target)
    report = run_task(task, cfg, out=out, verbose=verbose, thread_id=_thread_id(out, url))
    _print_summary(report, report.get("run_dir", out or ""))


@app.command()
def batch(
    folder: str = typer.Argument(..., help="folder of task files"),
    backend: str = typer.Option("auto", help="auto, interpreter, cuda or npu"),
    out: Optional[str] = typer.Option(None, help="batch folder (default runs/batch-<folder>)"),
    workers: int = typer.Option(1, help="tasks at once per GPU (timing still gets the GPU alone); with several "
                                        "local GPUs each task is pinned to one"),
    max_rounds: Optional[int] = typer.Option(None, help="rewrite rounds per task"),
    only: Optional[str] = typer.Option(None, help="comma-separated task names"),
    all_tiers: bool = typer.Option(False, help="gather every tier before the first rewrite (ablation)"),
    deadline: Optional[float] = typer.Option(None, help="after this many seconds start no new task and stop the "
                                             "runs still going (checkpointed: the next batch resumes them)"),
    shuffle: bool = typer.Option(False, help="fixed pseudo-random task order (a cut-short batch stays a fair sample)"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="run the tasks on Ray: a cluster "
                                              "address (host:port, ray://host:10001), auto (the running cluster) "
                                              "or local (a fresh single-node instance); one GPU per task on cuda"),
    accept_unmeasured: bool = typer.Option(False, "--accept-unmeasured",
                                           help="as optimize's: without timing (CPU), each task's result is its "
                                                "first verified candidate instead of the initial kernel"),
    checkpoint_url: Optional[str] = _url_option(),
) -> None:
    """Optimize every task in a folder, headless and resumable; write results.json and summary.md."""
    from pathlib import Path
    url = _use_checkpoint_url(checkpoint_url)

    from tritondx.batch import run_batch
    extra = []
    if max_rounds:
        extra += ["--max-rounds", str(max_rounds)]
    if all_tiers:
        extra += ["--all-tiers"]
    if accept_unmeasured:   # each task's `tritondx optimize` gets it
        extra += ["--accept-unmeasured"]
    out_dir = out or f"runs/batch-{Path(folder).name}"
    _BATCH_RESUME[:] = [f"tritondx batch {folder} --out {out_dir}"]
    agg = run_batch(folder, out_dir, backend=backend, workers=workers, extra_args=extra,
                    only=only.split(",") if only else None, deadline_s=deadline, shuffle=shuffle,
                    ray_address=ray_address, checkpoint_url=url)
    typer.echo(f"batch folder: {out_dir}")
    for k, v in agg.items():
        typer.echo(f"  {k}: {v}")


@app.command()
def verify(
    task: str = typer.Argument(..., help="task file (the original: its reference, inputs, shapes, tolerances)"),
    candidate: str = typer.Argument(..., help="candidate file (its launch() and kernels are what is checked)"),
    backend: str = typer.Option("auto", help="auto, interpreter, cuda or npu"),
    timeout: float = typer.Option(600, help="seconds the verification job may take"),
) -> None:
    """Verify (and on a GPU, time) a candidate against a task. Exit 0 only when verified, 1 when rejected."""
    from tritondx.tools.task.spec import load_task
    load_task(task)
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.check_file import check_candidate_file
    from tritondx.logs import Heartbeat
    with Heartbeat() as beat:  # a line whenever nothing was printed for 15 s
        beat.task_event({"id": "verify", "name": "verify", "input": {"candidate": candidate}})
        res = check_candidate_file(task, candidate, get_backend(backend), timeout=timeout)
    v = res.verdict
    if v.passed:
        unrun = sum("dead code on this device" in c for c in v.coverage)  # device-kind sides (README)
        flipped = sum("checked here with the device-kind tests flipped" in c for c in v.coverage)
        typer.echo(f"verified: {candidate} ({v.checks} checks on {v.backend})"
                   + (f"; {flipped} device-kind branch side(s) of another device checked here with the tests "
                      f"flipped to their CUDA side" if flipped else "")
                   + (f"; {unrun} device-kind branch side(s) run only on another device and were not checked "
                      f"here" if unrun else ""))
    else:
        typer.echo(f"rejected: {candidate}: {v.klass}: {v.reason}")
    if v.ran:
        typer.echo(f"checks run: {', '.join(v.ran)}")
    if v.coverage:  # shapes, dtypes, value stress, the branches the candidate adds (tools/report/checked.py)
        from tritondx.tools.report.checked import summarize
        for line in summarize(v.coverage):
            typer.echo(f"checked: {line}")
    if res.speedup is not None:
        typer.echo(f"speed: {res.speedup:.2f}x the initial kernel ({res.timing})")
    elif v.passed:
        typer.echo(f"speed: not measured on {v.backend}")
    sys.exit(0 if v.passed else 1)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(
    ctx: typer.Context,
    out: str = typer.Option("captured", help="folder for the task files (new or empty)"),
    top: Optional[int] = typer.Option(None, help="write tasks for the N kernels with the largest time share"),
    min_share: Optional[str] = typer.Option(None, help="write tasks for kernels with at least this share, e.g. 2%"),
) -> None:
    """Run a program (`-- python my_script.py ...` or `-- pytest ...`), record its Triton launches, rank the
    kernels by time share and write one oracle-mode task per selected kernel."""
    from pathlib import Path

    from tritondx.tools.intake.capture import capture as _capture, conclude, parse_share
    summary = _capture(list(ctx.args), Path(out), top=top, min_share=parse_share(min_share))
    lines, code = conclude(summary, out)   # the exit status is the program's, with what failed
    for stream, text in lines:
        typer.echo(text, err=stream == "err")
    if code:
        sys.exit(code)


@app.command()
def apply(
    run: str = typer.Argument(..., help="run folder (or a batch folder: every run in it) of a captured task"),
    commit: bool = typer.Option(False, "--commit", help="also commit the patch in the source file's git repository"),
    write: bool = typer.Option(False, "--write", help="also write the patch into the files (no git needed)"),
) -> None:
    """Write the optimized kernel of a captured task back into its source file as a reviewable patch."""
    from pathlib import Path

    from tritondx.tools.intake.apply import apply_run
    for res in apply_run(Path(run), commit=commit, write=write):
        typer.echo(res.summary())


def _usage_errors() -> tuple[type, ...]:
    """click's exception class, and the copy of click that typer >= 0.2x vendors (``typer._click``)."""
    import importlib

    import click
    out: list[type] = [click.exceptions.ClickException]
    try:
        out.append(importlib.import_module("typer._click.exceptions").ClickException)
    except (ImportError, AttributeError):
        pass
    return tuple(out)


TMP_PREFIX = "tritondx-run-"


def own_temp_folder() -> str:
    """Every temporary folder this process and its children make (sandboxed jobs' scratch folders, a capture's
    boot folder, ...) goes into one folder of its own, ``$TMPDIR/tritondx-run-<pid>-*``, removed when the process
    ends (normally, on an error, on SIGTERM or Ctrl-C). One left by a process that was killed outright (SIGKILL)
    is removed by the next tritondx command that starts."""
    import atexit
    import shutil
    import tempfile
    base = tempfile.gettempdir()
    sweep_temp_folders(base)
    root = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=base)
    # Ray keeps its sessions (and their sockets, whose paths must stay short) where it kept them before
    os.environ.setdefault("RAY_TMPDIR", base)
    os.environ["TMPDIR"] = root
    tempfile.tempdir = root
    atexit.register(shutil.rmtree, root, True)  # registered first: runs after every other exit handler
    return root


def sweep_temp_folders(base: str) -> list[str]:
    """Remove the temporary folders of tritondx processes that no longer exist; returns them."""
    import shutil
    gone = []
    for p in Path(base).glob(f"{TMP_PREFIX}*"):
        pid = p.name[len(TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not p.is_dir() or p.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
            gone.append(str(p))
        except OSError:  # alive (another user's)
            pass
    return gone


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt (finally blocks and exit handlers run)."""


#: the signal that stopped this process (typer answers a KeyboardInterrupt with a plain return of 130)
_STOPPED_BY: list[int] = []


def _on_signal(signum, frame) -> None:
    import signal
    _STOPPED_BY[:] = [signum]
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


#: what continues an interrupted batch (set by the batch verb; a single run is named by runner.ACTIVE_RUN)
_BATCH_RESUME: list[str] = []


def resume_hint() -> str:
    """The command that continues what this process was doing when it was interrupted, or ""."""
    if _BATCH_RESUME:
        return f"continue the batch (its finished tasks are kept) with: {_BATCH_RESUME[0]}"
    runner = sys.modules.get("tritondx.runner")
    active = getattr(runner, "ACTIVE_RUN", None) if runner else None
    if active:
        return f"continue the run from its last checkpoint with: tritondx resume {active[0]}"
    return ""


def _interrupted(term: bool) -> None:
    """One line saying what stopped and how to continue, then the exit: the exit handlers (judge servers,
    temporary folders) run now, and threads still waiting on a job do not hold the process up."""
    import atexit
    hint = resume_hint()
    typer.echo(f"tritondx: {'stopped (SIGTERM)' if term else 'interrupted'}" + (f"; {hint}" if hint else ""),
               err=True)
    code = 143 if term else 130
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
    except BaseException:  # a second Ctrl-C during the clean-up: go
        pass
    os._exit(code)


def main() -> None:
    """The command line: in a temporary folder of its own, with SIGTERM and Ctrl-C answered by one line (both
    put back as they were when it returns, for a caller in the same process)."""
    import signal
    import tempfile
    before = (os.environ.get("TMPDIR"), tempfile.tempdir, os.environ.get("RAY_TMPDIR"))
    _STOPPED_BY.clear()
    _BATCH_RESUME.clear()
    own_temp_folder()
    handlers = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):  # never one ignored
                handlers[sig] = signal.signal(sig, _on_signal)
    except ValueError:  # not the main thread (an embedding caller): its own handlers stay
        pass
    try:
        _run_cli()
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
        if before[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before[0]
        tempfile.tempdir = before[1]
        if before[2] is None:
            os.environ.pop("RAY_TMPDIR", None)


def _run_cli() -> None:
    import signal
    try:
        rv = app(standalone_mode=False)
        if _STOPPED_BY:  # typer returned 130 for the KeyboardInterrupt the signal raised
            _interrupted(_STOPPED_BY[0] == signal.SIGTERM)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
    except TritonDXError as exc:
        if _debug["on"]:
            traceback.print_exc()
        typer.echo(f"tritondx: error: {exc}", err=True)
        sys.exit(2)
    except typer.Abort as exc:  # click turns Ctrl-C (and SIGTERM: Terminated) into Abort
        if isinstance(exc.__cause__, KeyboardInterrupt) or _STOPPED_BY:
            _interrupted(isinstance(exc.__cause__, Terminated) or _STOPPED_BY == [signal.SIGTERM])
        typer.echo("tritondx: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt as exc:
        _interrupted(isinstance(exc, Terminated))
    except SystemExit:
        raise
    except Exception as exc:  # the last line of defence: one line unless --debug
        if isinstance(exc, _usage_errors()):  # a wrong command line: one line, click's exit code (2)
            typer.echo(f"tritondx: error: {exc.format_message()} (see tritondx --help)", err=True)
            sys.exit(exc.exit_code)
        if _debug["on"]:
            traceback.print_exc()
        typer.echo(f"tritondx: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
