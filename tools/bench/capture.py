"""Compile a task's kernels for a named target exactly as the JIT would, without a device.

Runs inside a sandboxed worker. The task's own ``launch`` is called on CPU tensors; every
``kernel[grid](...)`` it makes is intercepted at ``JITFunction.run``: the JIT's own binder
(``create_function_from_signature``) and ``_pack_args`` derive the specialization from the real
arguments (divisibility by 16, equal-to-1 integers, constexprs, num_warps, num_stages), then
``triton.compile`` builds every stage for the target. Nothing is launched. Optionally every MLIR
pass's output is captured (``MLIR_ENABLE_DUMP``) for the compiler analysis.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tritondx.tools.task.module import as_tuple, load_module, norm_shape, to_dtype


@contextlib.contextmanager
def _stderr_to(path: Path):
    """Redirect fd 2 (where MLIR prints its per-pass dumps) into a file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def parse_target(spec: str):
    """'cuda:90' -> GPUTarget('cuda', 90, 32)."""
    from triton.backends.compiler import GPUTarget
    family, _, arch = spec.partition(":")
    if family != "cuda":   # the CUDA adapter's own job (Ascend kernels are captured by tools/npu/capture.py)
        raise ValueError(f"the capture job compiles for cuda targets only, not {spec!r}")
    return GPUTarget("cuda", int(arch or 90), 32)


def _grid_size(grid: Any, bound_args: dict) -> list[int]:
    if callable(grid):
        grid = grid(bound_args)
    g = [int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,))]
    return g + [1] * (3 - len(g))


def _sass(cubin: bytes, workdir: Path) -> str:
    """Disassemble with the nvdisasm/cuobjdump that the triton wheel carries."""
    import triton
    bindir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    path = workdir / "k.cubin"
    path.write_bytes(cubin)
    for tool, args in (("nvdisasm", ["-c", "-g", "-gi"]), ("cuobjdump", ["--dump-sass"])):
        exe = bindir / tool
        if exe.exists():
            r = subprocess.run([str(exe), *args, str(path)], capture_output=True, text=True, timeout=120)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout
    return ""


# ptxas -v summary lines:
#   ptxas info    : Used 38 registers, used 1 barriers, 2048 bytes smem
#       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
PTXAS_REGS_RE = re.compile(r"Used (\d+) registers")
PTXAS_SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
# .target sm_90a
PTX_TARGET_RE = re.compile(r"^\.target\s+(\S+)", re.M)


def _resources(ptx: str, workdir: Path) -> dict[str, int]:
    """Registers, stack and spills as ptxas reports them for this PTX."""
    import triton
    exe = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    m = PTX_TARGET_RE.search(ptx)
    if not exe.exists() or not m:
        return {}
    src = workdir / "k.ptx"
    src.write_text(ptx)
    r = subprocess.run([str(exe), "-v", "--gpu-name", m.group(1), str(src), "-o", str(workdir / "v.cubin")],
                       capture_output=True, text=True, timeout=120)
    return ptxas_resources(r.stdout + r.stderr)


def ptxas_resources(out: str) -> dict[str, int]:
    """Registers, stack and spills read from ptxas's ``-v`` report (``Used 40 registers``, ``0 bytes stack frame,
    0 bytes spill stores, 0 bytes spill loads``); {} where it has none."""
    res: dict[str, int] = {}
    if (mr := PTXAS_REGS_RE.search(out)):
        res["registers"] = int(mr.group(1))
    if (ms := PTXAS_SPILL_RE.search(out)):
        res["stack_bytes"], res["spill_store_bytes"], res["spill_load_bytes"] = map(int, ms.groups())
    return res


#: the order of a record's stages (the SASS is disassembled beside the next kernel's compile)
STAGE_ORDER = ("ttir", "ttgir", "llir", "ptx", "sass", "passes")


def capture(job: dict[str, Any]) -> dict[str, Any]:
    """Compile every launch of the task's ``launch`` for the target; the SASS of each kernel (nvdisasm:
    about 1 s of its own per kernel) is disassembled in a thread while the next kernel compiles."""
    from concurrent.futures import ThreadPoolExecutor

    import triton
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction, create_function_from_signature
    from triton import knobs

    target = parse_target(job.get("target", "cuda:90"))
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    per_pass = bool(job.get("per_pass"))
    backend = make_backend(target)
    records: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="tdx-capture-"))
    disasm = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="tdx-sass")
    sass_jobs: list[tuple[dict[str, Any], str, Any]] = []   # (record, tag, future of the SASS text)

    def capture_run(self, *args, grid, warmup, **kwargs):
        kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound_args, specialization, options)
        name = self.fn.__name__
        idx = len(records)
        tag = f"{idx:02d}_{name}"
        src = ASTSource(self, signature, constexprs, attrs)
        cache = scratch / f"cache{idx}"
        os.environ["TRITON_CACHE_DIR"] = str(cache)
        knobs.cache.dir = str(cache)
        passes_file = out_dir / f"{tag}.passes.txt"
        if per_pass:
            os.environ["MLIR_ENABLE_DUMP"] = "1"
        # the compile's own ptxas run reports the resources (``-v``), printed where the knob asks: read there
        # instead of running ptxas a second time (half of a large kernel's capture: fla_logsumexp 19 s of 41 s)
        ptxas_log = io.StringIO()
        knobs.nvidia.dump_ptxas_log = True
        try:
            ctx = _stderr_to(passes_file) if per_pass else contextlib.nullcontext()
            with ctx, contextlib.redirect_stdout(ptxas_log):
                compiled = triton.compile(src, target=target, options=options.__dict__)
        finally:
            os.environ.pop("MLIR_ENABLE_DUMP", None)
            knobs.nvidia.dump_ptxas_log = False
        stages = {}
        for stage in ("ttir", "ttgir", "llir", "ptx"):
            text = compiled.asm.get(stage)
            if text:
                p = out_dir / f"{tag}.{stage}"
                p.write_text(text if isinstance(text, str) else text.decode())
                stages[stage] = str(p)
        cubin = compiled.asm.get("cubin")
        if cubin:
            work = scratch / f"sass{idx}"
            work.mkdir()
            sass_jobs.append((stages, tag, disasm.submit(_sass, cubin, work)))
        if per_pass and passes_file.exists():
            stages["passes"] = str(passes_file)
        ptx_text = compiled.asm.get("ptx")
        resources = ptxas_resources(ptxas_log.getvalue()) or \
            (_resources(ptx_text, scratch) if isinstance(ptx_text, str) else {})
        md = compiled.metadata
        meta = {k: getattr(md, k) for k in ("num_warps", "num_stages", "num_ctas", "shared", "name")
                if hasattr(md, k)}
        for k in ("n_regs", "n_spills", "n_max_threads"):
            v = getattr(compiled, k, None)
            if v is not None:
                meta[k] = v
        records.append({
            "index": idx,
            "kernel": name,
            "grid": _grid_size(grid, bound_args),
            "constexprs": {str(k): (v if isinstance(v, (int, float, bool, str)) or v is None else str(v))
                           for k, v in constexprs.items()},
            "attrs": {str(k): v for k, v in attrs.items()},
            "signature": {k: str(v) for k, v in signature.items()},
            # the launch's runtime scalars (loop bounds, sizes): what the IR's trip counts are read from
            "scalars": {str(k): v for k, v in bound_args.items() if isinstance(v, (int, float, bool))},
            "options": {k: options.__dict__[k] for k in ("num_warps", "num_stages", "num_ctas")
                        if k in options.__dict__},
            "metadata": meta,
            "resources": {**resources, "shared_bytes": int(meta.get("shared", 0) or 0)},
            "stages": stages,
        })
        return None

    def autotune_run(self, *args, **kwargs):
        config = self.configs[min(int(job.get("config_index", 0)), len(self.configs) - 1)]
        self.nargs = dict(zip(self.arg_names, args))
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        return self.fn.run(*args, **kwargs, **config.all_kwargs())

    JITFunction.run = capture_run
    Autotuner.run = autotune_run
    mod = load_module(job["task"], "capture")
    dtype = to_dtype(job.get("dtype") or mod.DTYPES[0])
    shape = norm_shape(job["shape"]) if job.get("shape") is not None else norm_shape(mod.BENCH_SHAPES[0])
    inputs = as_tuple(mod.make_inputs(shape, dtype, 0, "cpu"))
    try:
        try:
            mod.launch(*inputs)
        except Exception as exc:  # the launcher may use outputs of a kernel we did not run
            if not records:
                raise
            records.append({"launcher_stopped": f"{type(exc).__name__}: {exc}"[:300]})
        for stages, tag, fut in sass_jobs:
            sass = fut.result()
            if sass:
                p = out_dir / f"{tag}.sass"
                p.write_text(sass)
                stages["sass"] = str(p)
            ordered = {k: stages[k] for k in STAGE_ORDER if k in stages}
            stages.clear()
            stages.update(ordered)
    finally:
        disasm.shutdown(wait=True)
        shutil.rmtree(scratch, ignore_errors=True)
    manifest = {"task": job["task"], "target": job.get("target", "cuda:90"), "shape": shape if not isinstance(shape, tuple) else list(shape),
                "dtype": str(dtype), "launches": records, "triton_version": triton.__version__,
                # what a later tier checks before it reuses this capture (tools/evidence/analysis.py)
                "per_pass": per_pass, "source_sha256": hashlib.sha256(Path(job["task"]).read_bytes()).hexdigest(),
                "requested_shape": job.get("shape"), "config_index": int(job.get("config_index", 0))}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    return manifest
