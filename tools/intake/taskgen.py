"""Write one captured kernel as a task file in the existing task format (README "Task format").

- the kernel and the Triton helpers of its file are copied (plain ``@triton.jit``: an autotuner's choice
  is frozen to the captured configuration), with the imports and constants their source names;
- ``launch(...)`` re-issues the captured launch with that copy: tensors written by the launch become fresh
  outputs (same values and strides), scalars, constexprs, launch options and the grid are expressions of
  the input tensors where one expression fits every captured signature (``X.shape[1]``,
  ``triton.cdiv(n, BLOCK)``, ``triton.next_power_of_2(...)``), literals where the value never changed,
  and launcher inputs otherwise;
- ``reference(...)`` is the same launch of the original kernel (oracle mode, tools/intake/oracle.py);
- each captured signature is one shape (keyed by its largest tensor's shape): the smallest ones are
  CHECK_SHAPES, the largest BENCH_SHAPES; TOLERANCE comes from the dtype and the reduction length.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import torch

from tritondx.tools.intake.errors import CaptureError
from tritondx.tools.intake.oracle import RUNTIME, derive_tolerance, is_reduction
from tritondx.tools.intake.records import ArgRecord, FunctionInfo, GroupRecord, KernelRecord, KernelSummary
from tritondx.tools.task.spec import _decorator_name

MAX_CHECK_SHAPES = 3
MAX_BENCH_SHAPES = 3
_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def _file_text(path: str, start: int, end: int) -> str:
    """Lines start..end (1-based, inclusive) of a file: apply finds them there again (they may have moved)."""
    try:
        lines = Path(path).read_text().splitlines(keepends=True)
    except OSError:
        return ""
    return "".join(lines[start - 1:end])


# ---- the copied source -------------------------------------------------------------------------------------

def _jit_only(info: FunctionInfo, keep_other_decorators: bool = False) -> str:
    """The function's source with only its ``@triton.jit`` decorator (or all, for a plain Python helper)."""
    tree = ast.parse(info.source)
    fdef = tree.body[0]
    lines = info.source.splitlines(keepends=True)
    body = "".join(lines[fdef.lineno - 1:])
    if keep_other_decorators:
        return info.source
    jit = [ast.get_source_segment(info.source, d) for d in fdef.decorator_list
           if _decorator_name(d).endswith("jit")]
    return "".join(f"@{d}\n" for d in jit) + body if jit else "@triton.jit\n" + body


def copied_source(kernel: KernelRecord) -> tuple[list[str], list[str], list[dict]]:
    """(import lines, constant + helper blocks, origins of every copied function) for the kernel's closure."""
    if kernel.closure is None:
        raise CaptureError(kernel.name, f"its source cannot be copied: {kernel.closure_error}")
    imports = ["import torch", "import triton", "import triton.language as tl"]
    blocks: list[str] = []
    origins: list[dict] = []
    for item in kernel.closure:
        if item.kind == "module":
            line = f"import {item.module}" if item.module == item.name else f"import {item.module} as {item.name}"
        elif item.kind == "import":
            line = f"from {item.module} import {item.attr}" + (f" as {item.name}" if item.attr != item.name else "")
        elif item.kind == "constant":
            value = repr(item.value)
            blocks.append(f"{item.name} = tl.constexpr({value})" if item.constexpr else f"{item.name} = {value}")
            continue
        else:
            info = item.info
            blocks.append(_jit_only(info, keep_other_decorators=not item.jit).rstrip() + "\n")
            origins.append(_origin(info))
            continue
        if line not in imports:
            imports.append(line)
    return imports, blocks, origins


def _origin(info: FunctionInfo) -> dict:
    return {"name": info.name, "module": info.module, "file": info.file, "start_line": info.start_line,
            "def_line": info.def_line, "end_line": info.end_line,
            "text": _file_text(info.file, info.start_line, info.end_line)}


# ---- which captured signatures the task keeps --------------------------------------------------------------

def _structure(g: GroupRecord) -> tuple:
    return tuple((n, a.kind, len(a.shape)) for n, a in g.args.items())


def keep_groups(s: KernelSummary) -> tuple[list[GroupRecord], int]:
    """The signatures with the structure of the most time-consuming one, one per shape key."""
    groups = [g for g in s.groups if g.grid is not None and g.written]
    if not groups:
        failed = [g.failed for g in s.groups if g.failed]
        why = (f"its launch failed ({failed[0]})" if failed and all(g.failed or not g.written for g in s.groups)
               else "no launch wrote any of its tensors" if all(not g.written for g in s.groups)
               else "its grid could not be evaluated")
        raise CaptureError(s.kernel.name, f"cannot be made a task: {why}")
    ref = _structure(groups[0])
    kept: dict[tuple, GroupRecord] = {}
    for g in groups:
        if _structure(g) == ref and shape_key(g) not in kept:
            kept[shape_key(g)] = g
    return list(kept.values()), len(s.groups) - len(kept)


def shape_key(g: GroupRecord) -> tuple:
    tensors = [a for a in g.args.values() if a.kind == "tensor"]
    big = max(tensors, key=lambda a: (a.numel, len(a.shape)))
    return tuple(big.shape) if big.shape else (1,)


def _primary(g: GroupRecord) -> str:
    floats = [a.dtype for a in g.args.values() if a.kind == "tensor" and a.dtype.startswith(("float", "bfloat"))]
    if floats:
        return max(set(floats), key=floats.count)
    return next(a.dtype for a in g.args.values() if a.kind == "tensor")


# ---- expressions for values that vary with the signature ---------------------------------------------------

class _Slots:
    """Candidate expressions over the launcher's tensors and already-defined locals, evaluated per group."""

    def __init__(self, groups: list[GroupRecord], tensors: list[str]):
        self.groups = groups
        self.base: list[tuple[str, list[int]]] = []
        for t in tensors:
            recs = [g.args[t] for g in groups]
            nd = len(recs[0].shape)
            self.base.append((f"{t}.numel()", [r.numel for r in recs]))
            for i in reversed(range(nd)):
                self.base.append((f"{t}.shape[{i}]", [r.shape[i] for r in recs]))
            if nd >= 2:
                self.base.append((f"({t}.numel() // {t}.shape[-1])",
                                  [r.numel // max(r.shape[-1], 1) for r in recs]))
            for i in range(nd):
                self.base.append((f"{t}.stride({i})", [r.stride[i] for r in recs]))
        self.locals: list[tuple[str, list[int]]] = []   # scalars / constexprs defined so far

    def define(self, name: str, values: list[Any]) -> None:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            self.locals.append((name, values))

    def express(self, values: list[Any], derived: bool, name: str = "") -> str | None:
        """An expression equal to ``values`` in every group; None when none fits (the value becomes an input).
        ``derived``: also try next_power_of_2 / cdiv forms (constexprs and grid dimensions)."""
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return repr(values[0]) if len(set(map(repr, values))) == 1 else None
        constant = len(set(values)) == 1
        if constant and values[0] in (0, 1):
            return repr(values[0])
        # a stride argument takes the tensors' strides first; any other value takes shapes before strides
        strided = [c for c in self.locals + self.base if "stride" in c[0].lower()]
        plain = [c for c in self.locals + self.base if "stride" not in c[0].lower()]
        pool = strided + plain if "stride" in name.lower() else plain + strided
        for expr, vals in pool:
            if vals == values:
                return expr
        if derived:
            for expr, vals in pool:
                if [_next_pow2(v) for v in vals] == values:
                    return f"triton.next_power_of_2({expr})"
            for cname, cvals in self.locals:
                for expr, vals in pool:
                    if expr != cname and all(c > 0 for c in cvals) and \
                            [-(-v // c) for v, c in zip(vals, cvals)] == values:
                        return f"triton.cdiv({expr}, {cname})"
        return repr(values[0]) if constant else None


def _next_pow2(v: int) -> int:
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


# ---- the task file -------------------------------------------------------------------------------------------

def _safe_name(kernel: KernelRecord, used: set[str]) -> str:
    base = _IDENT.sub("_", kernel.name).strip("_").lower() or "kernel"
    name, i = base, 2
    while name in used:
        name, i = f"{base}_{i}", i + 1
    used.add(name)
    return name


def _tensor_spec(a: ArgRecord, written: bool) -> dict:
    """Shape, strides and dtype; for a tensor the kernel only reads, its captured value range too (a tensor
    it writes starts from plain random values: what it held before the launch may be uninitialized memory)."""
    spec = {"shape": a.shape, "stride": a.stride, "offset": a.offset, "dtype": a.dtype}
    if written:
        return spec
    for k in ("min", "max", "mean", "std", "values", "sentinels", "nonneg_min"):
        v = getattr(a, k)
        if v is not None:
            spec[k] = v
    return spec


def _literal(v: Any) -> str:
    return repr(v)


def _reduction_length(groups: list[GroupRecord]) -> int:
    best = 1
    for g in groups:
        ts = [a for a in g.args.values() if a.kind == "tensor" and a.shape]
        multi = [a.shape[-1] for a in ts if len(a.shape) >= 2]
        best = max([best] + (multi if multi else [a.numel for a in ts]))
    return best


def build_task(s: KernelSummary, task_name: str, timing: str) -> str:
    """The text of the task file for one captured kernel."""
    k = s.kernel
    groups, dropped = keep_groups(s)
    params = k.params
    g0 = groups[0]
    for n, a in g0.args.items():
        if a.kind == "other":
            raise CaptureError(k.name, f"argument {n} is a {a.type} ({a.repr[:60]}): only tensors, scalars and "
                                       "constexprs can be captured")
    tensor_params = [n for n in params if g0.args[n].kind == "tensor"]
    _check_overlaps(k, groups, tensor_params)
    written = [n for n in tensor_params if any(n in g.written for g in groups)]

    slots = _Slots(groups, tensor_params)
    inputs: list[str] = list(tensor_params)         # launcher parameters, in order
    extra_specs: list[tuple[str, list[Any]]] = []    # (input name, per-group value) for values that vary
    body: list[str] = [f"    {n} = fresh_like({n})  # written by the kernel: a new buffer, same values"
                       for n in written]
    call_args: list[str] = []
    keyword = False
    for n in params:
        a0 = g0.args[n]
        is_cx = n in k.constexprs
        keyword = keyword or is_cx
        if a0.kind == "tensor":
            expr = n
        elif a0.kind == "none":
            expr = "None"
        elif a0.kind == "dtype":
            expr = a0.value if str(a0.value).startswith("torch.") else f"tl.dtype({str(a0.value)!r})"
        else:
            values = [g.args[n].value for g in groups]
            e = slots.express(values, derived=is_cx, name=n)
            if e is None:
                inputs.append(n)
                extra_specs.append((n, values))
            elif e != n:
                body.append(f"    {n} = {e}")
            slots.define(n, values)
            expr = n
        call_args.append(f"{n}={expr}" if keyword else expr)
    options = []
    for opt in sorted({o for g in groups for o in g.options}):
        values = [g.options.get(opt) for g in groups]
        if any(v is None for v in values):
            continue
        e = slots.express(values, derived=False) if len(set(map(repr, values))) > 1 else _literal(values[0])
        if e is None:
            inputs.append(opt)
            extra_specs.append((opt, values))
            e = opt
        options.append(f"{opt}={e}")
    grid = []
    for d in range(max(len(g.grid) for g in groups)):
        values = [(g.grid + [1, 1, 1])[d] for g in groups]
        e = slots.express(values, derived=True)
        if e is None:
            inputs.append(f"grid{d}")
            extra_specs.append((f"grid{d}", values))
            e = f"grid{d}"
        grid.append(e)
    grid_text = "(" + ", ".join(grid) + ("," if len(grid) == 1 else "") + ")"
    body.append(f"    grid = {grid_text}")
    outs = ", ".join(written)

    def launch_body(kernel_expr: str) -> str:
        call = f"    {kernel_expr}[grid](" + ", ".join(call_args + options) + ")"
        return "\n".join(body + [call, f"    return {outs}"]) + "\n"

    imports, blocks, origins = copied_source(k)
    kernel_src = _jit_only(k).rstrip() + "\n"
    origin = _origin(k)

    # shapes: one per kept signature; make_inputs reads the captured specs
    group_table = {}
    for g in groups:
        specs = [_tensor_spec(g.args[n], n in written) for n in tensor_params]
        idx = groups.index(g)
        specs += [{"value": vals[idx]} for _, vals in extra_specs]
        group_table[shape_key(g)] = {"primary": _primary(g), "inputs": specs}
    by_size = sorted(groups, key=lambda g: sum(a.numel for a in g.args.values() if a.kind == "tensor"))
    check = [shape_key(g) for g in by_size[:MAX_CHECK_SHAPES]]
    bench = [shape_key(g) for g in by_size[::-1][:MAX_BENCH_SHAPES]]
    dtypes = []
    for g in groups:
        if _primary(g) not in dtypes:
            dtypes.append(_primary(g))
    red = is_reduction(k.source + "".join(b for b in blocks))
    klen = _reduction_length(groups) if red else None
    tolerance = {d: derive_tolerance(getattr(torch, d), klen) for d in dtypes}
    oracle = {
        "kernel": k.name, "module": k.module, "origin": origin, "helpers": origins,
        "call_sites": dict(sorted(s.sites.items(), key=lambda kv: -kv[1])[:8]),
        "timing": timing, "share": round(s.share, 6), "launches": s.launches, "total_ms": round(s.total_ms, 6),
        "signatures": len(s.groups), "signatures_kept": len(groups), "signatures_dropped": dropped,
        "reduction": red, "reduction_length": klen, "written": written,
        "inputs": inputs,
    }
    sig = ", ".join(inputs)
    text = [
        f'"""Captured by `tritondx capture`: {k.name} from {k.file}:{k.def_line}.',
        "",
        f"{s.launches} launches, {len(s.groups)} signatures, {s.share:.1%} of the captured "
        f"{'GPU time' if timing == 'cuda_events' else 'wall time (not GPU time)'}.",
        "Oracle mode: `reference` launches the original kernel exactly as captured; `launch` launches the copy",
        "below, which the optimizer rewrites. A `torch_reference(...)` defined here (PyTorch, same signature)",
        'wins over the oracle. `tritondx apply RUN` writes the optimized copy back into the source file."""',
        "",
        *imports,
        "",
        "import importlib",
        "from typing import Any",
        "",
        f"NAME = {task_name!r}",
        f"ORACLE = {oracle!r}",
        "",
        "",
        "# ---- oracle-mode helpers (a copy of tools/intake/oracle.py RUNTIME) ----",
        "",
        *[inspect.getsource(f) + "\n" for f in RUNTIME],
        "# ---- the captured kernel (the optimizer rewrites this copy and launch) ----",
        "",
        *[b + "\n" for b in blocks],
        kernel_src,
        "",
        f"def launch({sig}):",
        launch_body(k.name),
        "",
        f"_ORIGINAL = original_kernel({k.module!r}, {k.name!r}, {k.name})",
        "",
        "",
        f"def reference({sig}):",
        '    """The oracle: the original kernel, launched as captured (a torch_reference defined here wins)."""',
        '    if "torch_reference" in globals():',
        f"        return torch_reference({sig})",
        launch_body("_ORIGINAL"),
        "",
        f"GROUPS = {group_table!r}",
        "",
        "",
        "def make_inputs(shape, dtype, seed, device):",
        "    return make_group_inputs(GROUPS[tuple(shape)], dtype, seed, device)",
        "",
        "",
        f"CHECK_SHAPES = {check!r}",
        f"BENCH_SHAPES = {bench!r}",
        f"DTYPES = [{', '.join('torch.' + d for d in dtypes)}]",
        f"# from the dtype{' and the reduction length ' + str(klen) if klen else ''} (tools/intake/oracle.py)",
        "TOLERANCE = {" + ", ".join(f"torch.{d}: {t!r}" for d, t in tolerance.items()) + "}",
        "",
    ]
    return "\n".join(text)


def _check_overlaps(k: KernelRecord, groups: list[GroupRecord], tensors: list[str]) -> None:
    for g in groups:
        seen: dict[int, str] = {}
        for n in tensors:
            a = g.args[n]
            if a.storage in seen and a.numel:
                raise CaptureError(k.name, f"tensor arguments {seen[a.storage]} and {n} share memory: "
                                           "overlapping arguments cannot be reproduced as separate inputs")
            seen[a.storage] = n


def write_task(s: KernelSummary, out: Path, used: set[str], timing: str) -> Path:
    name = _safe_name(s.kernel, used)
    text = build_task(s, name, timing)
    try:
        ast.parse(text)
    except SyntaxError as exc:   # a bug here, never the user's: say which kernel
        raise CaptureError(s.kernel.name, f"the generated task does not parse (line {exc.lineno}: {exc.msg})") from exc
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.py"
    path.write_text(text)
    return path
