"""Capture triton-ascend IR for every kernel a task launches (standalone: runs inside the ascend venv).

Usage::

    python capture_script.py --task TASK.py --arch Ascend910B4 --out OUT_DIR
        [--compile-on-910-95] [--shape '[4096]'] [--dtype float32] [--seed 0] [--max-compiles 32]

No tritondx import happens here: this file runs under the interpreter of the triton-ascend
environment (triton-ascend installs itself as ``triton``). It

1. loads the task file by path and builds its inputs on the CPU (``make_inputs(shape, dtype, seed, 'cpu')``);
2. replaces ``JITFunction.run`` (and ``Autotuner.run``, which then takes the first config) so that
   ``kernel[grid](...)`` inside the task's ``launch`` does not launch anything: it computes the same
   specialization the JIT would (the JIT's own binder from ``create_function_from_signature``, the
   backend's attrs descriptor, the same ``constants`` rule), compiles with
   ``triton.compile(ASTSource(...), target=GPUTarget("npu", ARCH, 0), options=...)`` in a fresh
   ``TRITON_CACHE_DIR``, and catches the failure at the binary stage (no CANN here:
   "ASCEND_HOME_PATH is not set");
3. copies every IR stage that reached the cache (``*.ttir``, ``*.ttadapter``, ...) to ``OUT_DIR``
   and writes ``OUT_DIR/manifest.json``: per launch the kernel, grid, constexprs, num_warps, the
   stage reached and the error line where compilation stopped.

``TRITON_DISABLE_LINE_INFO=0`` is set before triton is imported so that ``triton-adapter-opt``
gets ``--mlir-print-debuginfo`` and the adapter IR keeps ``loc(...)`` attributes pointing at the
task source (the TTIR in the cache always carries ``#loc`` lines).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

# Must happen before triton is imported: keep source locations in the adapter IR.
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "0")
os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")

STAGE_ORDER = ("ttir", "ttadapter", "npubin")
STAGE_OF_ERROR = {"MLIRCompile": "ttir", "ConvertTritonIRToLinalgIR": "ttadapter",
                  "ConvertLinalgRToBinary": "npubin"}


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _error_line(exc: BaseException) -> str:
    """The line that says why compilation stopped (first meaningful line of the error)."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines()]
    skip = ("///", "[INFO]")
    if "encounters error:" in text:
        after = text.split("encounters error:", 1)[1]
        for ln in after.splitlines():
            ln = ln.strip()
            if ln and not ln.startswith(skip):
                # adapter crashes print "file:line:col: error: ..." lines; prefer the error one
                return ln[:500]
    for ln in lines:
        if ln and not ln.startswith(skip):
            return f"{type(exc).__name__}: {ln}"[:500]
    return type(exc).__name__


def _adapter_error(exc: BaseException) -> str | None:
    """For adapter failures, the first 'error:' line of the pass output, if any."""
    for ln in str(exc).splitlines():
        if "error:" in ln:
            return ln.strip()[:500]
    return None


class Capturer:
    def __init__(self, arch: str, compile_on_910_95: bool, out: Path, max_compiles: int):
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend

        self.triton = triton
        self.ASTSource = ASTSource
        self.arch = arch
        self.compile_on_910_95 = compile_on_910_95
        self.target = GPUTarget("npu", arch, 0)
        self.backend = make_backend(self.target)
        self.out = out
        self.max_compiles = max_compiles
        self.launches: list[dict] = []
        self.by_key: dict[str, dict] = {}
        self.n_compiles = 0

    # -- option handling -------------------------------------------------------------------------
    def _options(self, kwargs: dict) -> dict:
        opts = dict(kwargs)
        opts.setdefault("debug", False)
        if self.compile_on_910_95:
            # What the backend defaults would be if the module-level is_compile_on_910_95 were True.
            opts["compile_on_910_95"] = True
            opts.setdefault("multibuffer", False)
            opts.setdefault("enable_auto_bind_sub_block", False)
            opts.setdefault("enable_select_analysis", True)
        return opts

    # -- the patched JITFunction.run -------------------------------------------------------------
    def run(self, fn, args, grid, kwargs, autotune=None):
        user_kwargs = dict(kwargs)
        kwargs = self._options(kwargs)
        if fn.binder is None:
            fn.create_binder(self.backend)
        if getattr(fn, "bishengir_option", None):
            kwargs.update(fn.bishengir_option)
        bound_args, sig_and_spec, constexpr_vals, non_constexpr_vals, excess_kwargs = fn.binder(*args, **kwargs)
        key = "".join(sig_and_spec) + str((constexpr_vals, excess_kwargs))

        # grid exactly as JITFunction.run canonicalises it
        g = grid(bound_args) if callable(grid) else grid
        g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
        g3 = (g + (1, 1, 1))[:3]
        constexprs = {fn.params[i].name: _jsonable(constexpr_vals[j])
                      for j, i in enumerate(fn.constexpr_indices)}
        record = {
            "index": len(self.launches),
            "kernel": fn.__name__,
            "source_file": getattr(fn.fn, "__code__", None) and fn.fn.__code__.co_filename,
            "source_lineno": getattr(fn, "starting_line_number", None),
            "grid": list(g3),
            "num_programs": g3[0] * g3[1] * g3[2],
            "constexprs": constexprs,
            "num_warps": user_kwargs.get("num_warps"),
            "num_warps_explicit": "num_warps" in user_kwargs,
            "num_stages": user_kwargs.get("num_stages"),
            "launch_options": {k: _jsonable(v) for k, v in user_kwargs.items()
                               if k not in constexprs and k not in fn.arg_names},
            "autotune": autotune,
            "key": key,
        }
        prior = self.by_key.get(key)
        if prior is not None:
            prior["repeats"] += 1
            record.update({k: prior[k] for k in ("stage_reached", "stop_stage", "stop_reason", "artifacts",
                                                 "signature", "compile_s", "compile_dir")})
            record["same_as"] = prior["index"]
            record["repeats"] = 0
            self.launches.append(record)
            return None
        record["repeats"] = 1
        self.launches.append(record)
        self.by_key[key] = record
        self._compile(fn, record, bound_args, sig_and_spec, kwargs, excess_kwargs)
        return None

    def _compile(self, fn, record, bound_args, sig_and_spec, kwargs, excess_kwargs):
        record.update({"stage_reached": "none", "stop_stage": None, "stop_reason": None, "artifacts": {},
                       "signature": {}, "compile_s": 0.0, "compile_dir": None})
        if self.n_compiles >= self.max_compiles:
            record["stop_reason"] = f"not compiled: more than {self.max_compiles} distinct specializations"
            return
        self.n_compiles += 1
        t0 = time.time()
        options = self.backend.parse_options(kwargs)
        for k in excess_kwargs:
            if k not in options.__dict__:
                record["stop_reason"] = f"KeyError: keyword argument {k} was specified but unrecognised"
                return
        bound_vals = tuple(bound_args.values())
        sigkeys = [fn.params[i].name for i in fn.non_constexpr_indices]
        sigvals = sig_and_spec[:len(sigkeys)]
        signature = {k: ("*i8" if v == "none" else v) for k, v in zip(sigkeys, sigvals)}
        attrs = self.backend.get_attrs_descriptor(fn.params, bound_vals)
        constant_params = attrs.get_constants()
        constants = {p.name: v for (v, p) in zip(bound_vals, fn.params)
                     if p.is_constexpr or (p.num in constant_params) or v is None}
        record["signature"] = signature
        cache_dir = self.out / "cache" / f"{record['index']:03d}_{fn.__name__}"
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        cache_dir.mkdir(parents=True)
        os.environ["TRITON_CACHE_DIR"] = str(cache_dir)
        record["compile_dir"] = str(cache_dir)
        error = None
        try:
            src = self.ASTSource(fn, signature, constants, attrs)
            self.triton.compile(src, target=self.target, options=options.__dict__)
        except BaseException as exc:  # noqa: BLE001 - every failure is data here
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = exc
        record["compile_s"] = round(time.time() - t0, 3)
        # collect the stages that reached the cache
        dest = self.out / f"{record['index']:03d}_{fn.__name__}"
        dest.mkdir(parents=True, exist_ok=True)
        found = {}
        for path in sorted(cache_dir.rglob("*")):
            if not path.is_file() or path.name in ("lock",) or ".tmp." in path.name:
                continue
            ext = path.suffix.lstrip(".")
            target = dest / path.name
            shutil.copyfile(path, target)
            if ext in STAGE_ORDER or ext in ("json", "llir", "ll"):
                found[ext] = str(target)
        record["artifacts"] = found
        reached = [s for s in STAGE_ORDER if s in found]
        record["stage_reached"] = reached[-1] if reached else "none"
        if error is not None:
            stage_name = getattr(error, "stage_name", None)
            record["stop_stage"] = STAGE_OF_ERROR.get(stage_name, None)
            if record["stop_stage"] is None:
                nxt = [s for s in STAGE_ORDER if s not in found]
                record["stop_stage"] = nxt[0] if nxt else None
            record["stop_reason"] = _error_line(error)
            detail = _adapter_error(error)
            if detail and record["stop_stage"] != "npubin":
                record["stop_detail"] = detail
            (dest / "error.txt").write_text(f"{type(error).__name__}: {error}\n")


def load_task(path: Path):
    name = "tritondx_npu_task_" + path.stem.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


class _CaptureUtils:
    """What kernels and launchers ask ``driver.active.utils`` for, answered from the target table
    (there is no device here)."""

    def __init__(self, arch: str, cube_cores: int, vector_cores: int):
        self.arch, self.cube_cores, self.vector_cores = arch, cube_cores, vector_cores

    def get_device_properties(self, device=None):
        return {"max_shared_mem": 1, "num_aicore": self.cube_cores, "num_vectorcore": self.vector_cores}

    def get_arch(self):
        return self.arch

    def get_aicore_num(self):
        return self.cube_cores

    def get_aivector_core_num(self):
        return self.vector_cores


class CaptureDriver:
    """Stand-in for triton-ascend's NPUDriver (whose ``is_active`` is False without CANN), so that code
    touching ``triton.runtime.driver.active`` at import or launch time (``Autotuner.__init__`` asks it
    for a benchmarker; Ascend kernels often read the core count from it) works during capture."""

    def __init__(self, target, cube_cores: int, vector_cores: int):
        self.target = target
        self.utils = _CaptureUtils(target.arch, cube_cores, vector_cores)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        return None

    def get_current_stream(self, device=None):
        return 0

    def get_benchmarker(self):
        def no_bench(fn, *args, **kwargs):
            raise RuntimeError("benchmarking is not available during an IR capture")
        return no_bench

    def get_device_interface(self):
        import torch
        return torch.cpu

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(1)


def install_patches(capturer: Capturer, cube_cores: int = 20, vector_cores: int = 40):
    from triton.runtime import jit as jit_mod
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.driver import driver

    driver.set_active(CaptureDriver(capturer.target, cube_cores, vector_cores))

    def patched_run(self, *args, grid, warmup, **kwargs):
        return capturer.run(self, args, grid, kwargs, autotune=kwargs.pop("__tritondx_autotune", None))

    def patched_autotune_run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        config = self.configs[0]
        self.best_config = config
        info = {"configs": len(self.configs), "chosen": 0, "config": _jsonable(config.all_kwargs())}
        if config.pre_hook is not None:
            try:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            except Exception:  # noqa: BLE001 - pre hooks may touch device state
                pass
        ret = self.fn.run(*args, **kwargs, **config.all_kwargs(), __tritondx_autotune=info)
        self.nargs = None
        return ret

    jit_mod.JITFunction.run = patched_run
    Autotuner.run = patched_autotune_run


def _parse_shape(text: str | None):
    if not text:
        return None
    value = json.loads(text)
    return tuple(value) if isinstance(value, list) else value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compile-on-910-95", action="store_true")
    ap.add_argument("--shape", default=None, help="JSON list; default: the task's first BENCH_SHAPES entry")
    ap.add_argument("--dtype", default=None, help="torch dtype name; default: the task's first DTYPES entry")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-compiles", type=int, default=32)
    ap.add_argument("--cube-cores", type=int, default=20, help="what driver.active.utils reports")
    ap.add_argument("--vector-cores", type=int, default=40, help="what driver.active.utils reports")
    ap.add_argument("--keep-cache", action="store_true", help="keep the per-compile Triton cache folders")
    a = ap.parse_args(argv)

    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    manifest = {"task": str(Path(a.task).resolve()), "arch": a.arch, "compile_on_910_95": a.compile_on_910_95,
                "launches": [], "launch_error": None, "python": sys.version.split()[0]}
    try:
        from importlib import metadata
        manifest["triton_ascend_version"] = metadata.version("triton-ascend")
    except Exception:  # noqa: BLE001
        manifest["triton_ascend_version"] = None
    capturer = None
    try:
        import torch

        capturer = Capturer(a.arch, a.compile_on_910_95, out, a.max_compiles)
        install_patches(capturer, a.cube_cores, a.vector_cores)
        task = load_task(Path(a.task).resolve())
        shape = _parse_shape(a.shape)
        if shape is None:
            shape = tuple(task.BENCH_SHAPES[0]) if isinstance(task.BENCH_SHAPES[0], (list, tuple)) \
                else task.BENCH_SHAPES[0]
        dtype = getattr(torch, a.dtype) if a.dtype else task.DTYPES[0]
        manifest["shape"] = _jsonable(shape)
        manifest["dtype"] = str(dtype).replace("torch.", "")
        inputs = task.make_inputs(shape, dtype, a.seed, "cpu")
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        with torch.no_grad():
            task.launch(*inputs)
    except BaseException as exc:  # noqa: BLE001 - reported in the manifest
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb)
                      if fr.filename == str(Path(a.task).resolve())), None)
        manifest["launch_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if where:
            manifest["launch_error"] += f" (at {where})"
        (out / "launch_error.txt").write_text(traceback.format_exc())
    if capturer is not None:
        manifest["launches"] = capturer.launches
    if not a.keep_cache:
        shutil.rmtree(out / "cache", ignore_errors=True)
    manifest["elapsed_s"] = round(time.time() - t0, 3)
    (out / "manifest.json").write_text(json.dumps(_jsonable(manifest), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
