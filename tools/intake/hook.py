"""The launch recorder that runs inside the captured program (``tritondx capture``).

Installed at interpreter start by the bootstrap ``sitecustomize`` (tools/intake/capture.py writes it), it
records every Triton kernel launch: the kernel (name, module, source file and lines, the globals its source
names), the Python frame that launched it, every argument (tensor shape, dtype, strides, storage offset,
value range on the first launch of a signature; scalar values), constexprs, grid, launch options, which
tensors the launch wrote, and its time. It depends only on the standard library, torch and triton: the
program may run under any environment that has those.

Timing: on a GPU, CUDA events recorded by Triton's own launch hooks (``triton.knobs.runtime.launch_enter_hook``
/ ``launch_exit_hook``, called right around the driver launch, so compile time and Python overhead are not
counted); where those hooks are not called (the interpreter, ``TRITON_INTERPRET=1``) the wall time of the
launch. Argument binding needs ``JITFunction.run`` / ``InterpretedFunction.run`` (the knobs hooks see no
arguments), which are wrapped here. Launches made by the autotuner while it benchmarks configurations are
not recorded.

At exit the records go to ``$TRITONDX_CAPTURE_DIR/capture-<pid>.json`` (plain JSON; the parent validates it
into ``tools/intake/records.py``).
"""

from __future__ import annotations

import ast
import atexit
import builtins
import inspect
import json
import os
import sys
import textwrap
import threading
import time
import types

DIR_ENV = "TRITONDX_CAPTURE_DIR"
#: distinct signatures kept per kernel; further launches of new signatures are counted as overflow
MAX_GROUPS_PER_KERNEL = 256
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid")
_SKIP_KWARGS = ("debug", "instrumentation_mode")

_state = threading.local()


def _busy() -> bool:
    return getattr(_state, "busy", False)


class Recorder:
    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.kernels: dict[str, dict] = {}
        self.groups: dict[tuple, dict] = {}
        self.overflow: dict[str, int] = {}
        self.pending: list[tuple[dict, object, object]] = []   # (group, start event, end event)
        self.timing = "wall"
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.failures: list[dict] = []           # launches that raised (hook.describe_failure)
        self.program_error: dict | None = None   # the program's uncaught exception (sys.excepthook)

    # -- kernel identity and source ------------------------------------------------------------------------
    def kernel_info(self, jitfn) -> tuple[str, dict]:
        fn = getattr(jitfn, "fn", jitfn)
        key = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn.__name__)}:" \
              f"{getattr(getattr(fn, '__code__', None), 'co_filename', '?')}"
        info = self.kernels.get(key)
        if info is None:
            info = describe_function(fn)
            info["key"] = key
            try:
                info["closure"] = closure(fn)
            except Exception as exc:  # recorded, the task writer refuses this kernel with the reason
                info["closure"] = None
                info["closure_error"] = f"{type(exc).__name__}: {exc}"
            self.kernels[key] = info
        return key, info

    # -- one launch -----------------------------------------------------------------------------------------
    def launch(self, jitfn, original, args, kwargs):
        if kwargs.get("warmup") or _busy() or _in_autotuner_bench():
            return original(jitfn, *args, **kwargs)
        _state.busy = True
        try:
            key, info = self.kernel_info(jitfn)
            bound, options, grid_spec = _bind(jitfn, info, args, kwargs)
            site = _call_site()
            gkey = (key, _signature_key(bound, info), repr(_eval_grid(grid_spec, bound)), repr(sorted(options.items())))
            group = self.groups.get(gkey)
            first = group is None
            if first:
                n_kernel = sum(1 for k in self.groups if k[0] == key)
                if n_kernel >= MAX_GROUPS_PER_KERNEL:
                    self.overflow[key] = self.overflow.get(key, 0) + 1
                    first = False
                else:
                    group = {"kernel": key, "count": 0, "total_ms": 0.0, "timed": 0, "sites": {},
                             "args": {n: describe_arg(v, stats=True) for n, v in bound.items()},
                             "options": options, "grid": _eval_grid(grid_spec, bound)}
                    self.groups[gkey] = group
            snapshot = _snapshot(bound) if first else None
        except Exception as exc:  # never break the user's program
            self.errors.append(f"{type(exc).__name__}: {exc}")
            _state.busy = False
            return original(jitfn, *args, **kwargs)
        _state.current = None
        if group is not None:
            group["count"] += 1
            group["sites"][site] = group["sites"].get(site, 0) + 1
            _state.current = {"group": group, "start": None}
        t0 = time.perf_counter()
        raised = None
        try:
            _state.busy = False
            return original(jitfn, *args, **kwargs)
        except Exception as exc:   # recorded (what failed, where, why), then the program sees it unchanged
            raised = exc
            raise
        finally:
            wall = (time.perf_counter() - t0) * 1e3
            _state.busy = True
            try:
                cur, _state.current = getattr(_state, "current", None), None
                if raised is not None:
                    failure = self.failure(key, info, site, bound, raised)
                    if group is not None:
                        group["failed"] = failure["error"]
                elif group is not None:
                    if cur and cur.get("end") is not None:
                        self.pending.append((group, cur["start"], cur["end"]))
                        if len(self.pending) >= 512:
                            self.drain(block=False)
                    else:
                        group["total_ms"] += wall
                        group["timed"] += 1
                    if snapshot is not None:
                        written = [n for n, before in snapshot.items() if not _same(bound[n], before)]
                        group["written"] = written
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                _state.busy = False

    def failure(self, key: str, info: dict, site: str, bound: dict, exc: BaseException) -> dict:
        """The first failed launch of each kernel (later ones are counted): what was raised, at which line of
        the kernel, and why, in words (tools/intake/capture.py prints it as one line)."""
        for f in self.failures:
            if f["kernel"] == key:
                f["count"] += 1
                return f
        f = {"kernel": key, "name": info["name"], "file": info["file"], "def_line": info["def_line"], "site": site,
             "count": 1, "interpreter": _interpreting(), **describe_failure(exc, info, bound)}
        self.failures.append(f)
        return f

    # -- Triton's launch hooks (GPU path) -------------------------------------------------------------------
    def enter_hook(self, metadata):
        cur = getattr(_state, "current", None)
        if cur is None:
            return
        import torch
        if torch.cuda.is_current_stream_capturing():   # no timed events inside a CUDA graph capture
            return
        cur["start"] = torch.cuda.Event(enable_timing=True)
        cur["start"].record()

    def exit_hook(self, metadata):
        cur = getattr(_state, "current", None)
        if cur is None or cur.get("start") is None:
            return
        import torch
        cur["end"] = torch.cuda.Event(enable_timing=True)
        cur["end"].record()
        self.timing = "cuda_events"

    def drain(self, block: bool) -> None:
        keep = []
        for group, start, end in self.pending:
            if block or end.query():
                if block:
                    end.synchronize()
                group["total_ms"] += start.elapsed_time(end)
                group["timed"] += 1
            else:
                keep.append((group, start, end))
        self.pending = keep

    def dump(self) -> None:
        try:
            self.drain(block=True)
        except Exception as exc:
            self.errors.append(f"drain: {type(exc).__name__}: {exc}")
        data = {"pid": os.getpid(), "argv": sys.argv, "timing": self.timing,
                "interpreter": _interpreting(),
                "kernels": list(self.kernels.values()), "groups": list(self.groups.values()),
                "overflow": self.overflow, "errors": self.errors[:20], "failures": self.failures,
                "program_error": self.program_error}
        os.makedirs(self.out_dir, exist_ok=True)
        path = os.path.join(self.out_dir, f"capture-{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(data, f, default=str)
        os.replace(path + ".tmp", path)


# ---- a failed launch ------------------------------------------------------------------------------------------

def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception: the interpreter wraps the kernel's own error (``InterpreterError(repr(e))``)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or (exc.__context__ if not exc.__suppress_context__ else None)
        if nxt is None:
            break
        exc = nxt
    return exc


def _frame_in(exc: BaseException, file: str) -> tuple[int, str] | None:
    """The deepest traceback line of ``exc`` in ``file`` (the kernel's source file): (line, its text)."""
    import linecache
    found = None
    tb = exc.__traceback__
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if os.path.abspath(fn) == file:
            found = (tb.tb_lineno, linecache.getline(fn, tb.tb_lineno).strip())
        tb = tb.tb_next
    return found


def describe_failure(exc: BaseException, info: dict, bound: dict | None = None) -> dict:
    """What a failed launch raised (``error``: one line), the kernel line it failed at, and ``why``.

    Under the interpreter (TRITON_INTERPRET=1) a scalar argument is a plain Python number, not a typed
    Triton scalar as in compiled code: a kernel calling a method on one (``gate_multiplier.to(tl.float32)``,
    Liger-Kernel's swiglu and rms_norm) raises ``'float' object has no attribute 'to'``. That case is named
    as such; any other error is reported as raised."""
    import re
    root = _root_cause(exc)
    error = " ".join(f"{type(root).__name__}: {root}".split())[:300]
    at = _frame_in(root, info["file"]) or _frame_in(exc, info["file"])
    out = {"error": error, "line": at[0] if at else None, "line_text": at[1][:160] if at else ""}
    where = f"line {at[0]} (`{at[1][:100]}`)" if at else "the kernel"
    m = re.match(r"'(float|int|bool)' object has no attribute '(\w+)'", str(root))
    if _interpreting() and isinstance(root, AttributeError) and m:
        names = [n for n, v in (bound or {}).items() if type(v).__name__ == m.group(1)
                 and at and re.search(rf"\b{re.escape(n)}\s*\.\s*{m.group(2)}\b", at[1])]
        line = f"line {at[0]}" if at else "the kernel"
        call = f"`{names[0]}.{m.group(2)}(...)`" if names else f"`.{m.group(2)}` on a scalar argument"
        arg = f"the scalar argument {names[0]}" if names else "a scalar argument"
        out["why"] = (f"{line} calls {call}, but the interpreter passes {arg} as a plain Python {m.group(1)} "
                      f"(compiled Triton makes it a typed scalar): {error}")
        out["interpreter_unsupported"] = True
    elif _interpreting():
        out["why"] = f"the interpreter raised {error} at {where}"
    else:
        out["why"] = f"its launch raised {error}" + (f" at {where}" if at else "")
    return out


# ---- argument description ---------------------------------------------------------------------------------

def _is_tensor(v) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "stride") and hasattr(v, "dtype")


def describe_arg(v, stats: bool = False) -> dict:
    if v is None:
        return {"kind": "none"}
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": v}
    if isinstance(v, str):
        return {"kind": "str", "value": v}
    if _is_tensor(v):
        d = {"kind": "tensor", "shape": list(v.shape), "stride": list(v.stride()), "dtype": str(v.dtype).replace("torch.", ""),
             "offset": int(v.storage_offset()), "device": str(v.device),
             "storage": int(v.untyped_storage().data_ptr()), "storage_bytes": int(v.untyped_storage().nbytes())}
        if stats and v.numel():
            d.update(_stats(v))
        return d
    value = getattr(v, "value", v)   # tl.constexpr
    if isinstance(value, (bool, int, float, str)) and value is not v:
        return describe_arg(value)
    name = type(v).__name__
    if name == "dtype":                # tl.dtype / torch.dtype as a constexpr
        return {"kind": "dtype", "value": str(v)}
    return {"kind": "other", "type": f"{type(v).__module__}.{name}", "repr": repr(v)[:200]}


def _stats(t) -> dict:
    import torch
    with torch.no_grad():
        if t.dtype == torch.bool:
            return {"min": float(t.min()), "max": float(t.max())}
        if t.is_floating_point():
            f = t.detach().double()
            fin = f[torch.isfinite(f)]
            if not fin.numel():
                return {}
            out = {"min": float(fin.min()), "max": float(fin.max()), "mean": float(fin.mean()),
                   "std": float(fin.std()) if fin.numel() > 1 else 0.0}
            return out if all(abs(v) < float("inf") for v in out.values()) else {}
        if t.is_complex():
            return {}
        lo, hi = int(t.min()), int(t.max())
        out = {"min": lo, "max": hi}
        if t.numel() <= 1 << 24 or hi - lo < 64:
            values = torch.unique(t)
            if values.numel() <= 32:
                out["values"] = [int(v) for v in values]
            neg = values[values < 0]
            if 0 < neg.numel() <= 4 and hi >= 0:   # sentinels (ignore_index = -100 ...) among indices
                out["sentinels"] = [int(v) for v in neg]
                out["nonneg_min"] = int(values[values >= 0].min())
        return out


def _signature_key(bound: dict, info: dict) -> tuple:
    out = []
    for n, v in bound.items():
        if _is_tensor(v):
            out.append((n, tuple(v.shape), tuple(v.stride()), str(v.dtype), int(v.storage_offset())))
        elif isinstance(v, float) and n not in info["constexprs"]:
            out.append((n, "float"))     # float scalars vary (learning rates, scales): not a new signature
        else:
            d = describe_arg(v)
            out.append((n, d.get("kind"), repr(d.get("value", d.get("repr")))))
    return tuple(out)


def _snapshot(bound: dict) -> dict:
    return {n: v.detach().clone() for n, v in bound.items() if _is_tensor(v) and v.numel()}


def _same(t, before) -> bool:
    import torch
    if t.is_floating_point() or t.is_complex():
        a, b = torch.isnan(t), torch.isnan(before)
        return bool(torch.equal(a, b)) and bool(torch.equal(t.masked_fill(a, 0), before.masked_fill(b, 0)))
    return bool(torch.equal(t, before))


def _bind(jitfn, info: dict, args, kwargs) -> tuple[dict, dict, object]:
    params = info["params"]
    kw = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    bound = {}
    for name, v in zip(params, args):
        bound[name] = v
    for name in params:
        if name in kw:
            bound[name] = kw[name]
    defaults = info.get("defaults") or {}
    for name in params:
        if name not in bound and name in defaults:
            bound[name] = defaults[name]
    options = {k: v for k, v in kw.items() if k not in params and k not in _SKIP_KWARGS
               and isinstance(v, (bool, int, float, str, type(None)))}
    return bound, options, kwargs.get("grid")


def _eval_grid(grid, bound) -> list | None:
    try:
        g = grid(dict(bound)) if callable(grid) else grid
        return [int(x) for x in tuple(g)]
    except Exception:
        return None


def _call_site() -> str:
    """file:line:function of the first frame outside triton and this module."""
    f = sys._getframe(2)
    here = os.path.abspath(__file__)
    while f is not None:
        fn = f.f_code.co_filename
        mod = f.f_globals.get("__name__", "")
        if os.path.abspath(fn) != here and not mod.startswith("triton") and "/triton/" not in fn:
            return f"{fn}:{f.f_lineno}:{f.f_code.co_name}"
        f = f.f_back
    return "?"


def _in_autotuner_bench() -> bool:
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name in ("_bench", "do_bench", "prune_configs", "benchmark") and \
                "triton" in f.f_code.co_filename and "autotuner" in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


# ---- source and the globals a kernel's source names ------------------------------------------------------

def _is_jit(obj) -> bool:
    return type(obj).__name__ in ("JITFunction", "InterpretedFunction") and hasattr(obj, "fn")


def describe_function(fn) -> dict:
    """Name, module, file, source lines (decorators included) and parameters of a kernel's Python function."""
    lines, start = inspect.getsourcelines(fn)
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    node = tree.body[0]
    params = [a.arg for a in node.args.args]
    constexprs = [a.arg for a in node.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
    sig = inspect.signature(fn)
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty
                and isinstance(p.default, (bool, int, float, str, type(None)))}
    def_line = start + _def_offset(lines)
    return {"name": fn.__name__, "qualname": getattr(fn, "__qualname__", fn.__name__), "module": fn.__module__,
            "file": os.path.abspath(inspect.getsourcefile(fn) or fn.__code__.co_filename),
            "start_line": start, "def_line": def_line, "end_line": start + len(lines) - 1,
            "source": src, "params": params, "constexprs": constexprs, "defaults": defaults}


def _def_offset(lines: list[str]) -> int:
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith(("def ", "async def ")):
            return i
    return 0


def _names_loaded(fn_src: str) -> list[str]:
    """Global names the function's signature (annotations, defaults) and body load; decorators are not
    part of the copy (the task writes a plain ``@triton.jit``)."""
    fdef = ast.parse(fn_src).body[0]
    local = {a.arg for a in fdef.args.args}
    parts = list(fdef.body) + [a.annotation for a in fdef.args.args if a.annotation] + list(fdef.args.defaults)
    stored, loaded = set(), []
    for part in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store):
                    stored.add(node.id)
                elif node.id not in loaded:
                    loaded.append(node.id)
    return [n for n in loaded if n not in local and n not in stored]


def closure(fn, _seen: set | None = None) -> list[dict]:
    """What a copy of ``fn``'s source needs from its module's globals, in dependency order: imports of
    modules and of objects from importable modules, literal constants, and copies of the Triton helper
    functions defined in the same file (recursively, each with its own source lines)."""
    seen = _seen if _seen is not None else {fn.__name__}
    out: list[dict] = []
    g = fn.__globals__
    src = textwrap.dedent("".join(inspect.getsourcelines(fn)[0]))
    for name in _names_loaded(src):
        if name in seen:
            continue
        if name not in g:
            if hasattr(builtins, name):
                continue
            raise NameError(f"{fn.__name__} names {name!r}, not a global of {fn.__module__}")
        seen.add(name)
        obj = g[name]
        out.append(_resolve(name, obj, fn, seen))
        if out[-1]["kind"] == "function":
            out[-1:-1] = out[-1].pop("needs")
    return out


def _resolve(name: str, obj, fn, seen: set) -> dict:
    if isinstance(obj, types.ModuleType):
        return {"name": name, "kind": "module", "module": obj.__name__}
    value = getattr(obj, "value", obj) if type(obj).__name__ == "constexpr" else obj
    if isinstance(value, (bool, int, float, str, type(None))):
        return {"name": name, "kind": "constant", "value": value, "constexpr": value is not obj}
    target = getattr(obj, "fn", obj) if _is_jit(obj) else obj
    mod = getattr(target, "__module__", None)
    same_file = getattr(getattr(target, "__code__", None), "co_filename", None) == fn.__code__.co_filename
    if _is_jit(obj) and (same_file or mod in (None, "__main__")):
        info = describe_function(target)
        return {"name": name, "kind": "function", "jit": True, "info": info,
                "needs": closure(target, seen)}
    if mod and mod != "__main__":
        attr = getattr(target, "__name__", name)
        m = sys.modules.get(mod)
        if m is not None and getattr(m, attr, None) is obj:
            return {"name": name, "kind": "import", "module": mod, "attr": attr}
        m = sys.modules.get(fn.__module__)
        if m is not None and getattr(m, name, None) is obj and fn.__module__ != "__main__":
            return {"name": name, "kind": "import", "module": fn.__module__, "attr": name}
    if isinstance(target, types.FunctionType) and same_file:
        info = describe_function(target)
        return {"name": name, "kind": "function", "jit": False, "info": info, "needs": closure(target, seen)}
    raise TypeError(f"{fn.__name__} names {name!r} ({type(obj).__name__}), which cannot be copied or imported")


# ---- installation ------------------------------------------------------------------------------------------

_RECORDER: Recorder | None = None


def install(out_dir: str | None = None) -> Recorder | None:
    """Wrap the Triton launch entry points and register the launch hooks; dump the records at exit."""
    global _RECORDER
    if _RECORDER is not None:
        return _RECORDER
    out_dir = out_dir or os.environ.get(DIR_ENV)
    if not out_dir:
        return None
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    rec = Recorder(out_dir)
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    for cls in classes:
        original = cls.run

        def run(self, *args, _original=original, **kwargs):
            return rec.launch(self, _original, args, kwargs)

        run.__tritondx_capture__ = True
        cls.run = run
    try:
        from triton import knobs
        knobs.runtime.launch_enter_hook.add(rec.enter_hook)
        knobs.runtime.launch_exit_hook.add(rec.exit_hook)
    except (ImportError, AttributeError):
        pass
    previous = sys.excepthook

    def excepthook(kind, value, tb, _previous=previous):
        try:   # the program's own failure, for capture's last line
            root = _root_cause(value)
            where = None
            t = value.__traceback__
            while t is not None:   # the deepest frame outside triton and torch
                fn = t.tb_frame.f_code.co_filename
                if "/triton/" not in fn and "/torch/" not in fn:
                    where = f"{fn}:{t.tb_lineno}"
                t = t.tb_next
            rec.program_error = {"error": " ".join(f"{type(root).__name__}: {root}".split())[:300], "at": where}
        except Exception:
            pass
        _previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(rec.dump)
    _RECORDER = rec
    return rec
