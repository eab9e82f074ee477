"""Where a kernel's FLOPs and bytes come from: declared by the task, counted from the IR, measured by ncu.

The roofline needs the work of one launcher call at each bench shape. A task may declare it
(``flops(shape, dtype)``, ``min_bytes(shape, dtype)``); when it does not, the work is counted from the
kernel itself: the IR of each launch compiled with the shape's real arguments (tools/ir/work.py) and,
on a GPU with Nsight Compute, the counted instructions and DRAM bytes (tools/evidence/ncu.py). Each figure
keeps its source, which the report prints:

- FLOPs: ``declared`` > ``ncu-measured`` > ``IR-derived`` > ``default`` (0: no matmul work known);
- bytes: ``declared`` > the smaller of ``default`` (inputs read once + outputs written once) and
  ``IR-derived`` (global loads and stores issued, masked lanes counted). ncu's DRAM bytes are the traffic
  the kernel really caused; they are reported beside the figure, not used as the minimum.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tritondx.tools.ir.context import load_capture
from tritondx.tools.ir.work import launch_work, total_work


class WorkFigures(BaseModel):
    """The work of one launcher call at one shape, with where each figure came from."""

    flops: int = 0
    flops_source: str = "default"
    bytes: int = 0
    bytes_source: str = "default"
    ir_flops: int | None = None
    ir_bytes: int | None = None
    ncu_flops: int | None = None
    ncu_dram_bytes: int | None = None
    notes: list[str] = []


def declared(source: str) -> set[str]:
    """Which of ``flops`` / ``min_bytes`` a task file defines at module level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("flops", "min_bytes")}


def first_bench_shape(path: str) -> Any:
    """The shape the ncu launch job runs (tools/bench/launch.py: the first of BENCH_SHAPES), read from the
    task's source when it is a literal; None otherwise (ncu's figures then apply to no shape)."""
    try:
        tree = ast.parse(Path(path).read_text())
        for n in tree.body:
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BENCH_SHAPES" for t in n.targets):
                return ast.literal_eval(n.value)[0]
    except (OSError, SyntaxError, ValueError, IndexError, TypeError):
        return None
    return None


def shape_key(shape: Any) -> str:
    return str(list(shape) if isinstance(shape, tuple) else shape)


def ir_work(task_path: str, shapes: list[Any], target: str = "cuda:90",
            timeout: float = 300) -> dict[str, dict[str, Any]]:
    """IR-counted work per shape (one compile-only capture per shape, in the sandbox)."""
    from tritondx.tools.task.capture_job import capture_ir
    out: dict[str, dict[str, Any]] = {}
    source = Path(task_path).read_text()
    with tempfile.TemporaryDirectory(prefix="tdx-work-") as tmp:
        for i, shape in enumerate(shapes):
            folder = Path(tmp) / f"s{i}"
            manifest, error = capture_ir(task_path, folder, target, per_pass=False, timeout=timeout, shape=shape)
            if manifest is None:
                out[shape_key(shape)] = {"flops": None, "bytes": None, "notes": [f"IR capture failed: {error[:200]}"]}
                continue
            kernels = load_capture(folder / "manifest.json", source, source_path=task_path)
            out[shape_key(shape)] = total_work([launch_work(k.record, k.texts.get("ttir", "")) for k in kernels])
    return out


def resolve(entry: dict[str, Any], declared_names: set[str], ir: dict[str, Any] | None = None,
            ncu: dict[str, Any] | None = None) -> WorkFigures:
    """The figures a roofline should use for one bench entry (its ``bytes``/``flops`` are what the bench
    job computed: declared where the task declares them, else the default)."""
    w = WorkFigures(flops=int(entry.get("flops") or 0), bytes=int(entry.get("bytes") or 0))
    ir = ir or {}
    ncu = ncu or {}
    w.ir_flops, w.ir_bytes = ir.get("flops"), ir.get("bytes")
    w.ncu_flops, w.ncu_dram_bytes = ncu.get("flops"), ncu.get("dram_bytes")
    w.notes = list(ir.get("notes") or [])
    if "flops" in declared_names:
        w.flops_source = "declared"
    elif w.ncu_flops:
        w.flops, w.flops_source = int(w.ncu_flops), "ncu-measured"
    elif w.ir_flops:
        w.flops, w.flops_source = int(w.ir_flops), "IR-derived"
    if "min_bytes" in declared_names:
        w.bytes_source = "declared"
    elif w.ir_bytes and w.ir_bytes < w.bytes:
        w.bytes, w.bytes_source = int(w.ir_bytes), "IR-derived"
    else:
        w.bytes_source = "default (inputs read once + outputs written once)"
    return w


def work_for_bench(task_path: str, bench: dict[str, Any], ncu: dict[str, Any] | None = None,
                   ncu_shape: Any = None, target: str = "cuda:90") -> dict[str, WorkFigures]:
    """Figures for every shape of a bench result; the IR is captured only when the task leaves a figure
    undeclared, and ncu's (read at ``ncu_shape``, the launch job's shape) apply to that shape only."""
    names = declared(Path(task_path).read_text())
    shapes = [e["shape"] for e in bench.get("shapes", [])]
    ir = ir_work(task_path, [tuple(s) if isinstance(s, list) else s for s in shapes], target) \
        if names != {"flops", "min_bytes"} and shapes else {}
    out: dict[str, WorkFigures] = {}
    for e in bench.get("shapes", []):
        key = shape_key(e["shape"])
        here = ncu if ncu and ncu_shape is not None and shape_key(ncu_shape) == key else None
        out[key] = resolve(e, names, ir.get(key), here)
    return out
