"""Run the whole NVIDIA detector catalog over task files and print which detectors fired where.

    .venv/bin/python scripts/ir_survey.py examples/*.py bench/suite/*.py --out /tmp/survey [--workers 2] [--json f]

Each task is captured once for cuda:90 with per-pass dumps (``capture_ir(..., per_pass=True)``, a
sandboxed job of ~5 s), then both tiers' detectors run on its launches. Captures already in
``--out`` (a ``manifest.json`` newer than the task file) are reused. The table lists, for every
detector, the kernels it fired on (``task:kernel``, severity in brackets when not medium).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.context import load_capture
from tritondx.tools.ir.registry import detectors, run_detectors
from tritondx.tools.records.evidence import Finding


def capture_task(task: Path, out_root: Path, target: str = "cuda:90") -> tuple[Path, str]:
    from tritondx.tools.task.capture_job import capture_ir
    out = out_root / task.stem
    manifest = out / "manifest.json"
    if manifest.exists() and manifest.stat().st_mtime >= task.stat().st_mtime:
        return out, ""
    res, err = capture_ir(str(task), out, target, per_pass=True, timeout=600)
    return out, ("" if res else err)


def findings_for(task: Path, out: Path, arch: int = 90) -> list[Finding]:
    kernels = load_capture(out / "manifest.json", task.read_text(), arch=arch, source_path=str(task))
    return run_detectors(kernels, "ir") + run_detectors(kernels, "compiler")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--out", required=True, help="folder for the captures (reused between runs)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", help="also write {task: [finding, ...]} here")
    args = ap.parse_args(argv)
    tasks = [Path(t).resolve() for t in args.tasks]
    out_root = Path(args.out)
    out_root.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        captured = list(pool.map(lambda t: (t, *capture_task(t, out_root)), tasks))
    fired: dict[str, list[str]] = {d.id: [] for d in detectors("cuda")}
    dump: dict[str, list[dict]] = {}
    failures = []
    for task, out, err in captured:
        if err:
            failures.append(f"{task.name}: {err[:200]}")
            continue
        fs = findings_for(task, out)
        dump[task.name] = [f.model_dump() for f in fs]
        for f in fs:
            tag = f"{task.stem}:{f.kernel}" + ("" if f.severity == "medium" else f"[{f.severity}]")
            if tag not in fired[f.detector]:
                fired[f.detector].append(tag)
    for det, where in fired.items():
        print(f"{det} ({len(where)}): {', '.join(where) if where else '-'}")
    for line in failures:
        print("capture failed:", line, file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
