"""Tier 0 evidence from the launches a task's ``launch()`` makes (found by running it: tools/tune/record.py).

Each recorded launch (kernel, grid, constexprs, num_warps) is set against the device: programs vs SMs, waves,
elements and bytes per program and per thread. The block a program holds is read from the kernel's source: the
sizes of its ``tl.arange`` calls (constexprs take their recorded values), multiplied where the kernel builds 2-D
tiles (``[:, None]``), so the figure is an estimate, and the finding says so. Findings:

- ``launch_work`` (info): the figures of every launch, for the report and the first round;
- ``launch_grid_small``: fewer programs than SMs (part of the chip idles) -> grid_per_item, grid_to_cores,
  split_reduction;
- ``tiny_programs_launch``: at least 4 programs per SM, each holding at most ``TINY_ELEMENTS`` elements (16-256
  bytes of fp32 or 16-bit data) -> rows_per_program, launch_config.

Nothing runs here: :func:`launch_findings` reads records that a sandboxed job produced. They should come from a
call at a benchmark size (on a GPU, or a recording that skips the kernels' execution): at the interpreter's small
check sizes nearly every grid is smaller than the device, and ``launch_grid_small`` would say so of kernels that
fill it at their real sizes.
"""

from __future__ import annotations

import ast
from typing import Any

from tritondx.tools.records.evidence import Finding, finding_id

#: H200 (and H100 SXM) SM count, the default target's
SM_COUNT = 132
#: a program holding at most this many elements is tiny
TINY_ELEMENTS = 256
#: tiny programs matter from this many programs per SM on
TINY_PER_SM = 4


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b if b else None}


def _int_value(e: ast.expr, constexprs: dict[str, Any]) -> int | None:
    """An integer written with numbers, constexprs and ``+ - * //`` (``HEAD_DIM // 2``); None otherwise."""
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.Name):
        v = constexprs.get(e.id)
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(e, ast.BinOp) and type(e.op) in _INT_OPS:
        a, b = _int_value(e.left, constexprs), _int_value(e.right, constexprs)
        return None if a is None or b is None else _INT_OPS[type(e.op)](a, b)
    return None


def block_elements(fn: ast.FunctionDef, constexprs: dict[str, Any]) -> int | None:
    """Elements of the largest block a program of ``fn`` holds, from its ``tl.arange`` sizes: the largest one, or
    for a kernel that builds 2-D tiles the product of the two largest; None when a size is unknown."""
    sizes = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and _name(n.func) == "tl.arange" and len(n.args) == 2:
            lo, hi = n.args
            vals = [_int_value(e, constexprs) for e in (lo, hi)]
            if None in vals:
                return None
            sizes.append(vals[1] - vals[0])
    if not sizes:
        return 1
    sizes.sort(reverse=True)
    tiles = any(isinstance(n, ast.Subscript) and "None" in ast.unparse(n.slice) for n in ast.walk(fn))
    return sizes[0] * sizes[1] if tiles and len(sizes) > 1 else sizes[0]


def launch_findings(records: list[Any], source: str, sm_count: int = SM_COUNT, elem_bytes: int = 4) -> list[Finding]:
    """Findings for the recorded launches of kernels defined in ``source`` (records: LaunchRecord or dicts)."""
    tree = ast.parse(source)
    kernels = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    lines = source.splitlines()
    out: list[Finding] = []
    for r in records:
        r = r.model_dump() if hasattr(r, "model_dump") else dict(r)
        fn = kernels.get(r.get("kernel", ""))
        if fn is None:
            continue
        programs = 1
        for g in r.get("grid") or [1]:
            programs *= max(int(g), 1)
        warps = int((r.get("options") or {}).get("num_warps") or r.get("constexprs", {}).get("num_warps") or 4)
        elems = block_elements(fn, r.get("constexprs") or {})
        waves = programs / sm_count
        metric: dict[str, Any] = {"programs": programs, "sm_count": sm_count, "waves": round(waves, 3),
                                  "num_warps": warps, "grid": "x".join(str(g) for g in r.get("grid") or [])}
        if elems is not None:
            metric |= {"elements_per_program": elems, "bytes_per_program": elems * elem_bytes,
                       "elements_per_thread": round(elems / (warps * 32), 3)}
        name = fn.name
        line = fn.lineno
        text = lines[line - 1].strip() if line <= len(lines) else None
        per = (f", ~{elems} elements (~{elems * elem_bytes} B) per program, {elems / (warps * 32):g} per thread"
               if elems is not None else "")
        out.append(Finding(id=finding_id("launch_work", name, None) + f":{len(out)}", detector="launch_work",
                           tier="triage", stage="launch", kernel=name, severity="info",
                           message=f"{name}: grid {metric['grid']} = {programs} programs on {sm_count} SMs "
                                   f"({waves:.2f} waves){per} (block estimated from the source's tl.arange sizes)",
                           source_line=line, source_text=text, metric=metric))
        if programs < sm_count:
            out.append(Finding(
                id=finding_id("launch_grid_small", name, None), detector="launch_grid_small", tier="triage",
                stage="launch", kernel=name, severity="high" if programs < sm_count / 2 else "medium",
                message=f"{name} runs {programs} programs for {sm_count} SMs: {1 - programs / sm_count:.0%} of the "
                        "SMs idle whatever each program does", source_line=line, source_text=text, metric=metric,
                suggests=["grid_per_item", "grid_to_cores", "split_reduction"]))
        if elems is not None and elems <= TINY_ELEMENTS and programs >= TINY_PER_SM * sm_count:
            out.append(Finding(
                id=finding_id("tiny_programs_launch", name, None), detector="tiny_programs_launch", tier="triage",
                stage="launch", kernel=name, severity="high" if elems * elem_bytes <= 256 else "medium",
                message=f"{name} runs {programs} programs of ~{elems} elements (~{elems * elem_bytes} B) each: "
                        "launch and scheduling cost per byte dominate", source_line=line, source_text=text,
                metric=metric, suggests=["rows_per_program", "launch_config"]))
    return _dedupe(out)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    out = []
    for f in findings:
        if f.id not in seen:
            seen.add(f.id)
            out.append(f)
    return out
