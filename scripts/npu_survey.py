"""Survey many tasks on one Ascend target: capture each with triton-ascend, run the detectors, tabulate.

``.venv/bin/python scripts/npu_survey.py TASK... --target T --out DIR [--work DIR] [--timeout S]``

For every task file it calls :func:`~tritondx.tools.npu.capture.capture_ascend` (the IR stages are
kept under ``--work``, a scratch folder, not under ``--out``) and
:func:`~tritondx.tools.npu.analyze.analyze_capture`, then writes

- ``DIR/survey_<target>.json``: per task the kernels captured (distinct specializations), the stage
  each reached, its stop reason, the launch error or capture failure if any, and every finding
  (detector id, kernel, severity, source line and text, IR line);
- ``DIR/survey_<target>.md``: task -> compiles through the adapter? -> detectors fired, followed by
  the stop reasons and a detector -> tasks index.

Both files are rewritten after every task, so an interrupted survey leaves the tasks done so far.

"Compiles through the adapter": ``yes`` when every distinct kernel reached the ``ttadapter`` stage
(or beyond) and the launch finished; ``partial`` when some kernels did (or all did but the task's
``launch`` raised before the rest could be compiled); ``no`` when none did or the capture failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from tritondx.tools.npu.capture import STAGES, capture_ascend
from tritondx.tools.npu.analyze import analyze_capture

_ORDER = {s: i for i, s in enumerate(("none",) + STAGES)}
_ADAPTER = _ORDER["ttadapter"]


def _clip(text: str | None, n: int = 240) -> str | None:
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def adapter_verdict(kernels: list[dict[str, Any]], launch_error: str | None, error: str | None) -> str:
    """``yes`` / ``partial`` / ``no`` for one task (see the module docstring)."""
    if error is not None or not kernels:
        return "no"
    through = sum(_ORDER.get(k["stage_reached"], 0) >= _ADAPTER for k in kernels)
    if through == 0:
        return "no"
    if through < len(kernels) or launch_error:
        return "partial"
    return "yes"


def survey_task(task: str | Path, target: str, work_dir: Path, *, timeout: float = 300,
                python: str | None = None) -> dict[str, Any]:
    """Capture one task for ``target`` under ``work_dir`` and run the detectors; never raises for
    a failing capture (the error is recorded in the entry)."""
    task = Path(task)
    entry: dict[str, Any] = {"task": str(task), "name": task.stem, "target": target, "kernels": [],
                             "launch_error": None, "error": None, "findings": [], "detectors": []}
    t0 = time.time()
    try:
        cap = capture_ascend(str(task), target, work_dir / task.stem, timeout=timeout, python=python)
    except Exception as exc:  # noqa: BLE001 - a survey records failures instead of stopping
        entry["error"] = _clip(f"{type(exc).__name__}: {exc}", 600)
        entry["elapsed_s"] = round(time.time() - t0, 2)
        entry["adapter"] = adapter_verdict([], None, entry["error"])
        return entry
    entry.update(arch=cap.arch, shape=cap.shape, dtype=cap.dtype, stage_reached=cap.stage_reached,
                 stop_reason=_clip(cap.stop_reason), launch_error=_clip(cap.launch_error, 600),
                 triton_ascend_version=cap.triton_ascend_version, launches=len(cap.kernels))
    for k in cap.distinct():
        entry["kernels"].append({
            "index": k.index, "kernel": k.kernel, "grid": k.grid, "repeats": k.repeats,
            "stage_reached": k.stage_reached, "stop_stage": k.stop_stage, "stop_reason": _clip(k.stop_reason),
            "source_lineno": k.source_lineno, "compile_s": k.compile_s})
    try:
        findings = analyze_capture(cap, source=task.read_text())
    except Exception as exc:  # noqa: BLE001
        entry["error"] = _clip(f"detectors failed: {type(exc).__name__}: {exc}", 600)
        findings = []
    entry["findings"] = [{
        "detector": f.detector, "kernel": f.kernel, "severity": f.severity, "stage": f.stage,
        "source_line": f.source_line, "source_text": f.source_text, "ir_line": _clip(f.ir_line, 200),
        "message": _clip(f.message, 300)} for f in findings]
    entry["detectors"] = sorted({f.detector for f in findings})
    entry["adapter"] = adapter_verdict(entry["kernels"], entry["launch_error"],
                                       entry["error"] if not entry["kernels"] else None)
    entry["elapsed_s"] = round(time.time() - t0, 2)
    return entry


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(target: str, entries: list[dict[str, Any]], pending: int = 0) -> str:
    counts = Counter(e["adapter"] for e in entries)
    lines = [f"# Ascend survey: `{target}`", "",
             f"{len(entries)} tasks surveyed" + (f" ({pending} still pending)" if pending else "")
             + f": compile through the adapter stage -- yes {counts['yes']}, partial {counts['partial']}, "
             f"no {counts['no']}.", "",
             "Generated by `scripts/npu_survey.py`. Without CANN every kernel stops at the binary "
             "stage (`npubin`); `ttadapter` is the last stage detectors need.", "",
             "| task | kernels | adapter | stage | detectors fired (kernel:source line) |",
             "|---|---|---|---|---|"]
    for e in entries:
        hits: dict[str, list[str]] = {}
        for f in e["findings"]:
            hits.setdefault(f["detector"], []).append(f"{f['kernel']}:{f['source_line'] if f['source_line'] else '-'}")
        det = "; ".join(f"`{d}` ({', '.join(sorted(set(v)))})" for d, v in sorted(hits.items())) or "--"
        kern = ", ".join(k["kernel"] for k in e["kernels"]) or "--"
        lines.append(f"| {_md_cell(e['name'])} | {_md_cell(kern)} | {e['adapter']} | "
                     f"{e.get('stage_reached', 'none')} | {_md_cell(det)} |")
    stops = [e for e in entries if e["error"] or e["launch_error"] or e["adapter"] != "yes"]
    if stops:
        lines += ["", "## Not (fully) through the adapter", ""]
        for e in stops:
            why = e["error"] or e["launch_error"] or next(
                (f"{k['kernel']}: stopped at {k['stop_stage']}: {k['stop_reason']}" for k in e["kernels"]
                 if _ORDER.get(k["stage_reached"], 0) < _ADAPTER), "no kernel launched")
            lines.append(f"- **{e['name']}** ({e['adapter']}): {_md_cell(why)}")
    reasons = Counter(k["stop_reason"] for e in entries for k in e["kernels"] if k["stop_reason"])
    if reasons:
        lines += ["", "## Stop reasons (distinct kernels)", ""]
        lines += [f"- {n} x `{_md_cell(r)}`" for r, n in reasons.most_common()]
    by_det: dict[str, list[str]] = {}
    for e in entries:
        for d in e["detectors"]:
            by_det.setdefault(d, []).append(e["name"])
    lines += ["", "## Detector -> tasks", ""]
    lines += [f"- `{d}` ({len(v)}): {', '.join(v)}" for d, v in sorted(by_det.items())] or ["- none fired"]
    return "\n".join(lines) + "\n"


def survey(tasks: Iterable[str | Path], target: str, out_dir: str | Path, *, work_dir: str | Path | None = None,
           timeout: float = 300, python: str | None = None,
           progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Survey ``tasks`` on ``target``; writes ``survey_<target>.{json,md}`` in ``out_dir`` after every task
    and returns the JSON document."""
    tasks = [Path(t) for t in tasks]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix=f"npu_survey_{target}_"))
    work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"target": target, "work_dir": str(work), "tasks": [], "summary": {}}
    json_path, md_path = out_dir / f"survey_{target}.json", out_dir / f"survey_{target}.md"
    for i, task in enumerate(tasks):
        entry = survey_task(task, target, work, timeout=timeout, python=python)
        doc["tasks"].append(entry)
        counts = Counter(e["adapter"] for e in doc["tasks"])
        by_det: dict[str, list[str]] = {}
        for e in doc["tasks"]:
            for d in e["detectors"]:
                by_det.setdefault(d, []).append(e["name"])
        doc["summary"] = {"surveyed": len(doc["tasks"]), "pending": len(tasks) - i - 1,
                          "adapter": dict(counts), "detector_tasks": dict(sorted(by_det.items()))}
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
        md_path.write_text(render_markdown(target, doc["tasks"], pending=len(tasks) - i - 1))
        if progress is not None:
            progress(entry)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/npu_survey.py", description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="+", help="task files")
    ap.add_argument("--target", required=True, help="ascend910b, ascend910_93 or ascend950")
    ap.add_argument("--out", required=True, help="folder for survey_<target>.json / .md")
    ap.add_argument("--work", default=None, help="scratch folder for the captures (default: a new temp dir)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per capture")
    args = ap.parse_args(argv)

    def report(e: dict[str, Any]) -> None:
        extra = e["error"] or e["launch_error"] or ""
        print(f"{e['name']:<28} adapter={e['adapter']:<7} {e['elapsed_s']:6.1f}s "
              f"detectors={','.join(e['detectors']) or '-'} {_clip(extra, 120) or ''}", flush=True)

    doc = survey(args.tasks, args.target, args.out, work_dir=args.work, timeout=args.timeout, progress=report)
    print(json.dumps(doc["summary"]["adapter"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
