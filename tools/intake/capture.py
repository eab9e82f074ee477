"""``tritondx capture``: run a program with the launch recorder installed, rank its kernels, write tasks.

The program runs as a child process with a bootstrap folder first on ``PYTHONPATH``: its
``sitecustomize.py`` installs ``tools/intake/hook.py`` (then runs any ``sitecustomize`` the environment
already had), so every Python process the command starts (``python script.py``, ``pytest``, their
subprocesses) records its Triton launches into the capture folder. Afterwards the records of all processes
are merged per kernel and ranked by their share of the total kernel time: GPU time (CUDA events) on a GPU,
wall time of the launch under the interpreter (the table says which).

The capture exits with the program's status (:func:`conclude`). A launch that raised is recorded by the hook
(the kernel, the line it failed at, why: ``hook.describe_failure``), so a failed program's last line names
what failed (that kernel, else the program's uncaught exception) rather than a consequence (a kernel with no
written tensors); a kernel the interpreter cannot run (a method called on a scalar argument, which the
interpreter passes as a Python number) is said to be one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import structlog

from tritondx.tools.intake.errors import CaptureError
from tritondx.tools.intake.hook import DIR_ENV
from tritondx.tools.intake.records import CaptureFile, KernelSummary, LaunchFailure, ProgramError

log = structlog.get_logger(__name__)

_BOOTSTRAP = '''\
# written by tritondx capture: install the Triton launch recorder, then the environment's own sitecustomize
import importlib.util as _u, os as _os, sys as _sys
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _u.spec_from_file_location("tritondx_capture_hook", {hook!r})
_hook = _u.module_from_spec(_spec)
_sys.modules["tritondx_capture_hook"] = _hook
_spec.loader.exec_module(_hook)
_hook.install()
_rest = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
_sys.path[:] = _rest
import importlib.machinery as _m
_next = _m.PathFinder.find_spec("sitecustomize", _rest)
if _next is not None and _next.loader is not None:  # the one this bootstrap shadowed
    _mod = _u.module_from_spec(_next)
    _next.loader.exec_module(_mod)
'''


def bootstrap_dir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    hook = Path(__file__).with_name("hook.py").resolve()
    (folder / "sitecustomize.py").write_text(_BOOTSTRAP.format(hook=str(hook)))
    return folder


def run_program(command: list[str], records_dir: Path, env: dict[str, str] | None = None,
                timeout: float | None = None) -> int:
    """Run ``command`` with the recorder installed; records land in ``records_dir``. Returns its exit code."""
    if not command:
        raise CaptureError("capture", "no command: give the program after `--`, e.g. "
                                      "`tritondx capture -- python my_script.py`")
    records_dir.mkdir(parents=True, exist_ok=True)
    boot = bootstrap_dir(Path(tempfile.mkdtemp(prefix="tritondx-capture-boot-")))
    child_env = dict(os.environ if env is None else env)
    child_env[DIR_ENV] = str(records_dir.resolve())
    child_env["PYTHONPATH"] = os.pathsep.join([str(boot)] + [p for p in [child_env.get("PYTHONPATH", "")] if p])
    if command[0] in ("python", "python3"):
        command = [sys.executable] + command[1:]
    try:
        proc = subprocess.run(command, env=child_env, timeout=timeout)
    except FileNotFoundError as exc:
        raise CaptureError(command[0], f"cannot run: {exc.strerror}") from exc
    finally:  # the recorder's boot folder is the program's only: it goes with it
        import shutil
        shutil.rmtree(boot, ignore_errors=True)
    return proc.returncode


def load_records(records_dir: Path) -> list[CaptureFile]:
    out = []
    for p in sorted(records_dir.glob("capture-*.json")):
        out.append(CaptureFile.model_validate(json.loads(p.read_text())))
    return out


def summarize(files: list[CaptureFile]) -> tuple[list[KernelSummary], str]:
    """Kernels over all processes, ranked by total time (highest first); the timing kind used."""
    kernels: dict[str, KernelSummary] = {}
    timings = {f.timing for f in files if f.groups}
    timing = "cuda_events" if timings == {"cuda_events"} else "wall"
    for f in files:
        for k in f.kernels:
            if k.key not in kernels:
                kernels[k.key] = KernelSummary(kernel=k, groups=[], launches=0, total_ms=0.0)
        for g in f.groups:
            s = kernels[g.kernel]
            s.groups.append(g)
            s.launches += g.count
            s.total_ms += g.total_ms
            for site, n in g.sites.items():
                s.sites[site] = s.sites.get(site, 0) + n
        for key, n in f.overflow.items():
            kernels[key].overflow += n
            kernels[key].launches += n
    total = sum(s.total_ms for s in kernels.values()) or 1.0
    calls = sum(s.launches for s in kernels.values()) or 1
    for s in kernels.values():
        s.share = s.total_ms / total
        s.call_share = s.launches / calls
        s.groups.sort(key=lambda g: -g.total_ms)
    ranked = sorted((s for s in kernels.values() if s.launches), key=lambda s: (-s.total_ms, -s.launches))
    return ranked, timing


def select(ranked: list[KernelSummary], top: int | None, min_share: float | None) -> list[KernelSummary]:
    chosen = ranked
    if min_share is not None:
        chosen = [s for s in chosen if s.share >= min_share]
    if top is not None:
        chosen = chosen[:top]
    return chosen


def parse_share(text: str | None) -> float | None:
    """'2%' or '0.02' -> 0.02."""
    if text is None:
        return None
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise CaptureError("--min-share", f"not a share: {text!r} (give e.g. 2% or 0.02)") from None
    if not 0 <= v <= 1:
        raise CaptureError("--min-share", f"{text!r} is not between 0% and 100%")
    return v


def timing_label(timing: str) -> str:
    return ("GPU time (CUDA events around each launch)" if timing == "cuda_events"
            else "wall time of each launch (no GPU timing: interpreter or CPU; not GPU time)")


def print_table(ranked: list[KernelSummary], timing: str, chosen: list[KernelSummary], console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console(width=max(120, int(os.environ.get("COLUMNS", "0") or 0)))
    table = Table(title=f"Triton kernels, ranked by share of {timing_label(timing)}")
    for col, just in (("#", "right"), ("kernel", "left"), ("defined at", "left"), ("launches", "right"),
                      ("signatures", "right"), ("time (ms)", "right"), ("share", "right"), ("task", "left")):
        table.add_column(col, justify=just, no_wrap=col in ("kernel", "defined at"))
    picked = {id(s) for s in chosen}
    for i, s in enumerate(ranked, 1):
        k = s.kernel
        table.add_row(str(i), k.name, f"{_short(k.file)}:{k.def_line}", str(s.launches), str(len(s.groups)),
                      f"{s.total_ms:.3f}", f"{s.share:.1%}", "yes" if id(s) in picked else "")
    console.print(table)


def _short(path: str) -> str:
    parts = Path(path).parts
    return str(Path(*parts[-3:])) if len(parts) > 3 else path


def capture(command: list[str], out: Path, top: int | None = None, min_share: float | None = None,
            console=None) -> dict:
    """Run, rank, print, write one task per selected kernel into ``out``; returns the capture summary."""
    from tritondx.tools.intake.taskgen import write_task
    if out.exists() and any(p.suffix == ".py" for p in out.iterdir()):
        raise CaptureError(str(out), "already holds task files: give a new or empty --out folder")
    records_dir = out / "records"
    rc = run_program(command, records_dir)
    files = load_records(records_dir)
    ranked, timing = summarize(files)
    if not ranked and rc == 0:
        raise CaptureError(" ".join(command)[:80], "recorded no Triton kernel launch (exit code 0)")
    chosen = select(ranked, top, min_share)
    if ranked:
        print_table(ranked, timing, chosen, console)
    written, skipped = [], []
    used_names: set[str] = set()
    for s in chosen:
        try:
            path = write_task(s, out, used_names, timing)
            written.append({"kernel": s.kernel.name, "task": str(path), "share": s.share, "launches": s.launches})
        except CaptureError as exc:
            skipped.append({"kernel": s.kernel.name, "reason": exc.problem})
            log.warning("capture_task_skipped", kernel=s.kernel.name, reason=exc.problem)
    summary = {"command": command, "exit_code": rc, "timing": timing, "timing_label": timing_label(timing),
               "kernels": [{"kernel": s.kernel.name, "file": s.kernel.file, "line": s.kernel.def_line,
                            "launches": s.launches, "signatures": len(s.groups), "total_ms": s.total_ms,
                            "share": s.share, "sites": s.sites} for s in ranked],
               "tasks": written, "skipped": skipped,
               "errors": sorted({e for f in files for e in f.errors}),
               "failures": [f.model_dump() for f in _failures(files)],
               "program_error": next((f.program_error.model_dump() for f in files if f.program_error), None)}
    (out / "capture.json").write_text(json.dumps(summary, indent=1))
    return summary


# ---- how the capture ended: exit status and its last lines ---------------------------------------------------

def _failures(files: list[CaptureFile]) -> list[LaunchFailure]:
    """Failed launches over all processes, one per kernel (counts summed)."""
    out: dict[str, LaunchFailure] = {}
    for f in files:
        for x in f.failures:
            if x.kernel in out:
                out[x.kernel].count += x.count
            else:
                out[x.kernel] = x.model_copy()
    return list(out.values())


def failure_line(f: LaunchFailure) -> str:
    """One line naming the kernel and why its launch failed."""
    where = f"{f.name} ({_short(f.file)}:{f.def_line})"
    if f.interpreter and f.interpreter_unsupported:
        return (f"kernel {where} cannot run under the Triton interpreter (TRITON_INTERPRET=1): {f.why}; "
                f"capture this program on a GPU")
    if f.interpreter:
        return f"kernel {where} failed under the Triton interpreter (TRITON_INTERPRET=1): {f.why}"
    return f"kernel {where} failed: {f.why}"


def exit_status(rc: int) -> int:
    """The program's exit status as a process exit code (killed by signal N: 128+N, as a shell says)."""
    return 128 - rc if rc < 0 else rc


def conclude(summary: dict, out: Path | str) -> tuple[list[tuple[str, str]], int]:
    """The capture's last lines (``("out" | "err", text)``) and its exit status, which is the program's: a
    program that failed makes the capture fail, with what failed (the kernel whose launch raised, and why;
    else the program's uncaught exception) instead of a consequence of it. ``next: tritondx batch`` only
    when a task was written."""
    lines: list[tuple[str, str]] = []
    for t in summary["tasks"]:
        lines.append(("out", f"task: {t['task']} ({t['kernel']}, {t['share']:.1%} of {summary['timing_label']})"))
    for t in summary["skipped"]:
        lines.append(("out", f"skipped: {t['kernel']}: {t['reason']}"))
    rc = summary["exit_code"]
    failures = [LaunchFailure(**f) for f in summary.get("failures") or []]
    perr = ProgramError(**summary["program_error"]) if summary.get("program_error") else None
    if not rc:
        for f in failures:   # the program handled it (a fallback, a test that expected it): said, not fatal
            lines.append(("err", f"tritondx: warning: {failure_line(f)}"))
    if summary["tasks"]:
        lines.append(("out", f"next: tritondx batch {out}"))
    elif not rc:
        lines.append(("out", "no task written: nothing for `tritondx batch`"))
    if not rc:
        return lines, 0
    head = f"the program exited with code {rc}" + ("" if summary["kernels"] else " before any Triton launch")
    # the kernel whose failure the program died of; else the program's own exception (a kernel failure it
    # handled is not the cause); else a kernel failure (pytest, sys.exit: no uncaught exception reached the hook)
    crashed = [f for f in failures if perr and perr.error == f.error] or ([] if perr else failures[-1:])
    if crashed:
        f = crashed[0]
        more = [x.name for x in failures if x is not f]
        what = failure_line(f) + (f" (other kernels that failed: {', '.join(more)})" if more else "")
    elif perr:
        what = perr.error + (f" at {perr.at}" if perr.at else "")
        if failures:
            what += f" (kernels whose launch failed before: {', '.join(x.name for x in failures)})"
    else:
        what = "its own output above says why"
    if not summary["tasks"]:
        what += "; no task written"
    lines.append(("err", f"tritondx: error: {head}: {what}"))
    return lines, exit_status(rc)
