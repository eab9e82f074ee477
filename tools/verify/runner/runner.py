"""The untrusted half of verification: runs a candidate's ``launch`` on inputs the judge sends.

Run as a script, ``python -P runner.py``, by the judge (``judge/spawn.py``), in its own sandboxed process;
it writes the candidate's source (the first message) as ``candidate.py`` in its private folder. It never sees a seed, a result
path, the original task or the judge's code: it loads ``guard.py`` and ``wire.py`` from this folder
by path (no ``tritondx.tools.verify`` module is imported here) and talks to the judge only over its
inherited pipes: requests on fd ``REQ``, answers on fd ``ANS``, and each op the recorder sees, as it
happens, on fd ``EVIDENCE``. stdin is /dev/null and stdout goes to stderr, so what the candidate
prints cannot break the protocol. Everything sent back is diagnostics: the judge decides.

Before the candidate is imported: the launch counter wraps Triton's launch entry points, every
Python thread started later gets its own op recorder, and the timing functions are snapshot.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import stat
import sys
import threading
import time
import traceback
import _thread

HERE = os.path.dirname(os.path.abspath(__file__))
# the thread start as it is before the guard records every thread the candidate starts (record_threads): the
# compile notes' timer is the runner's own, not the candidate's
_START_THREAD = _thread.start_new_thread
#: an answer with at least this many tensor bytes is announced (``{"note": "answering"}``, with the compile notes on):
#: the judge gives the device back while the bytes cross the pipe (at ~0.5-1 GiB/s, seconds for a benchmark-size
#: output), and takes it again to rebuild them on its device
ANSWER_NOTE_BYTES = 4 << 20


def _load_sibling(name: str):
    if f"_dx_runner_{name}" in sys.modules:  # loaded once by a warm runner (zygote.py) before it forked
        return sys.modules[f"_dx_runner_{name}"]
    spec = importlib.util.spec_from_file_location(f"_dx_runner_{name}", os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _storage_span(t) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _overlaps(a, b) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0, a1 = _storage_span(a)
    b0, b1 = _storage_span(b)
    return a0 < b1 and b0 < a1


def _internal_overlap(t) -> bool:
    """True when two elements of ``t`` share memory (an expanded / stride-0 or overlapping view)."""
    import torch
    fn = getattr(torch._C, "_debug_has_internal_overlap", None)
    if fn is not None:
        return fn(t) == 1  # 0: no, 1: yes, 2: too hard to tell
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]



def _ifexp_lines(source: str) -> frozenset:
    """Lines of the conditional expressions in ``source`` (whose sides no line event tells apart)."""
    import ast
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    return frozenset(ln for n in ast.walk(tree) if isinstance(n, ast.IfExp)
                     for ln in range(n.lineno, (n.end_lineno or n.lineno) + 1))


#: most instruction positions one call reports (distinct ones: bounded by the code's size anyway)
MAX_SPOTS = 4096


@contextlib.contextmanager
def _line_trace(path: str, lines: set, spots: set | None = None, watch: frozenset = frozenset()):
    """Record the line numbers of ``path`` that run (all threads) while the block runs; on the lines in
    ``watch`` also the positions (line, col, end line, end col) of the instructions that run, which tell
    the two sides of a conditional expression apart."""
    positions: dict = {}

    def local(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
            if watch:
                frame.f_trace_opcodes = frame.f_lineno in watch
        elif event == "opcode" and spots is not None and len(spots) < MAX_SPOTS:
            code = frame.f_code
            table = positions.get(code)
            if table is None:
                table = positions[code] = list(code.co_positions())
            i = frame.f_lasti // 2
            if 0 <= i < len(table) and None not in table[i]:
                line, end_line, col, end_col = table[i]
                spots.add((line, col, end_line, end_col))
        return local

    def glob(frame, event, arg):
        if frame.f_code.co_filename == path:
            lines.add(frame.f_lineno)
            return local
        return None

    old = sys.gettrace()
    sys.settrace(glob)
    threading.settrace(glob)
    try:
        yield
    finally:
        sys.settrace(old)
        threading.settrace(old)  # type: ignore[arg-type]

#: modules whose attributes a candidate could keep state in; attributes added after the runner started are watched
FOREIGN_MODULES = ("builtins", "sys", "math", "functools", "itertools", "collections", "operator", "torch",
                   "triton", "triton.language")
#: elements of a small tensor whose contents are hashed (a counter kept in device memory); larger ones by metadata
STATE_TENSOR_ELEMS = 4096
#: most values one fingerprint visits (a huge container is cut there: its length and identity still count)
STATE_BUDGET = 200000


class StateWatch:
    """What the candidate keeps at module level across calls (issue 34): a fingerprint of its module's names
    (containers and plain values by content, small tensors by contents, the candidate's functions by their
    defaults, attributes and closure cells, its classes and their instances by their attributes) and of the
    attributes it added to a few shared modules (``torch.x = [0]``). ``changed()`` after a call: the names whose
    fingerprint that call changed. Triton's own objects (kernels, autotuners: compile caches) are not looked into.
    Like every answer of the runner, only evidence against the candidate: the judge decides."""

    def __init__(self, mod, path: str, torch) -> None:
        self.mod, self.path, self.torch = mod, path, torch
        self.foreign = {m: set(vars(sys.modules[m])) for m in FOREIGN_MODULES if m in sys.modules}
        self.last: dict | None = None

    def start(self) -> None:
        """The fingerprint after the import (module initialisation is not state kept across calls)."""
        self.last = self.snapshot()

    def snapshot(self) -> dict:
        self.budget = STATE_BUDGET
        out = {}
        for k, v in list(vars(self.mod).items()):
            if not (k.startswith("__") and k.endswith("__")):
                out[k] = self._fp(v, 0, frozenset())
        for m, keys in self.foreign.items():
            mod = sys.modules.get(m)
            for k in set(vars(mod)) - keys if mod is not None else ():
                out[f"{m}.{k}"] = self._fp(vars(mod).get(k), 0, frozenset())
        return out

    def changed(self) -> list[str]:
        if self.last is None:
            return []
        now = self.snapshot()
        names = sorted(k for k in set(now) | set(self.last) if now.get(k, "<unbound>") != self.last.get(k, "<unbound>")
                       and not (k not in self.last and (now[k][0] in _DEFINITIONS or k.startswith(_OURS))))
        self.last = now
        return names

    def _fp(self, v, depth: int, seen: frozenset):   # noqa: C901 - one case per kind of value
        self.budget -= 1
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            return (type(v).__name__, v if not isinstance(v, (str, bytes)) or len(v) < 4096 else hash(v))
        if self.budget < 0 or depth > 8:
            return ("cut", type(v).__name__, id(v), len(v) if hasattr(v, "__len__") else -1)
        if id(v) in seen:
            return ("cycle", id(v))
        seen = seen | {id(v)}
        torch = self.torch
        fp = lambda x: self._fp(x, depth + 1, seen)   # noqa: E731
        import types
        if isinstance(v, torch.Tensor):
            meta = (tuple(v.shape), str(v.dtype), str(v.device), v._version)
            if v.device.type == "meta" or v.numel() > STATE_TENSOR_ELEMS or v.is_sparse:
                return ("tensor", meta, v.data_ptr() if v.device.type != "meta" else 0)
            try:
                flat = v.detach().to("cpu").clone().reshape(-1)
                raw = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
                return ("tensor", meta, hash(bytes(raw.tolist())))
            except Exception:  # noqa: BLE001 - an exotic dtype: its metadata only
                return ("tensor", meta, v.data_ptr())
        mod_name = getattr(type(v), "__module__", "") or ""
        if mod_name.startswith("triton"):   # a kernel, an autotuner: Triton's own caches change as it compiles
            return ("triton", type(v).__name__, id(v))
        if isinstance(v, (list, tuple)) or type(v).__name__ == "deque":
            return (type(v).__name__, tuple(fp(x) for x in list(v)))
        if isinstance(v, (set, frozenset)):
            return (type(v).__name__, tuple(sorted(repr(fp(x)) for x in v)))
        if isinstance(v, dict):
            return (type(v).__name__, tuple(sorted((repr(fp(k)), repr(fp(x))) for k, x in list(v.items()))))
        if isinstance(v, bytearray):
            return ("bytearray", bytes(v))
        if isinstance(v, types.ModuleType):
            return ("module", v.__name__)
        if isinstance(v, types.FunctionType):
            if v.__code__.co_filename != self.path:
                return ("function", getattr(v, "__qualname__", ""), id(v))
            cells = tuple(fp(c.cell_contents) if _cell_set(c) else ("empty",) for c in (v.__closure__ or ()))
            return ("function", id(v), id(v.__code__), fp(v.__defaults__), fp(v.__kwdefaults__),
                    fp(dict(vars(v))), cells)
        if isinstance(v, type):
            if v.__module__ != self.mod.__name__:
                return ("type", v.__qualname__, id(v))
            return ("class", id(v), fp({k: x for k, x in vars(v).items() if not k.startswith("__")}))
        if type(v).__name__ == "count" and mod_name == "itertools":
            return ("count", repr(v))
        if isinstance(v, (types.SimpleNamespace, functools.partial)) or mod_name == self.mod.__name__:
            if isinstance(v, functools.partial):
                return ("partial", fp(v.func), fp(v.args), fp(v.keywords))
            return ("object", type(v).__qualname__, id(v), fp(dict(getattr(v, "__dict__", {}))))
        return ("opaque", type(v).__qualname__, id(v))


#: kinds of value a name may newly get during a call without being state: a class, module, function or object of
#: another module (the Triton interpreter binds its helpers, typing names and sentinels in a kernel's module on its
#: first launch)
_DEFINITIONS = ("type", "module", "function", "triton", "opaque")
#: flags of the runner's own interpreter patches (``interpreter.memcheck``, ``interpreter.libdevice``), which the
#: interpreter copies into a kernel's module with its own names
_OURS = ("_tdx_", "_tritondx_")


def _cell_set(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class Runner:
    def __init__(self, candidate: str, hello: dict, evidence_fd: int) -> None:
        import torch
        self.torch = torch
        guard_mod = _load_sibling("guard")
        self.guard_mod = guard_mod
        self.device = hello["device"]
        self.guard = guard_mod.LaunchGuard()
        self.guard.install()
        self.guard.allowed_extra_ops = set(hello.get("allowed_ops", []))
        write = os.write

        def sink(name: str, _write=write, _fd=evidence_fd) -> None:
            try:
                _write(_fd, (name + "\n").encode())
            except OSError:
                pass  # the judge counts what arrived; a closed channel ends the run at the next answer
        self.guard.sink = sink
        self.threads: list[str] = []
        guard_mod.record_threads(self.guard, self.threads)
        guard_mod.record_host_reads(self.guard)
        self.kept: list = []      # outputs of this group's calls, kept alive: same memory means a cache
        self.pool: list = []      # this group's input spans, reused: a data_ptr-keyed cache goes stale
        if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):  # libdevice on CPU, before the import
            from tritondx.tools.backends.interpreter.libdevice import install
            install()
            from tritondx.tools.backends.interpreter.memcheck import install as memcheck
            memcheck()   # an access outside every tensor argument raises on the call that makes it
        self.cand_path = candidate
        with open(candidate) as f:
            self.watch = _ifexp_lines(f.read())
        if hello.get("flip"):   # the judge's device flip (flip.py): device queries answer as on a GPU
            _load_sibling("fake_gpu").install(candidate)
        spec = importlib.util.spec_from_file_location("candidate", candidate)
        self.mod = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = self.mod   # triton's JIT looks the module up for globals
        self.state = StateWatch(self.mod, candidate, torch)   # shared modules' attributes before the import
        spec.loader.exec_module(self.mod)
        if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
            from tritondx.tools.task.module import round_robin_autotuners
            round_robin_autotuners(self.mod)
        self.import_threads = len(self.threads)
        self.state.start()

    def call(self, args: list, skip_mask: list, skip_rest: bool, profile: bool = False,
             trace: bool = False) -> dict:
        """One call of ``launch``. ``trace``: the judge wants the line trace of this call (it roughly
        triples an interpreted call's cost): only then are ``lines`` and ``positions`` answered."""
        torch, guard = self.torch, self.guard
        diag: dict = {}
        outs = None
        try:
            if profile:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            lines: set[int] = set()
            spots: set[tuple] = set()
            traced = _line_trace(self.cand_path, lines, spots, self.watch) if trace else contextlib.nullcontext()
            with guard.watch(poison=not profile, skip_kernels=skip_rest, skip_mask=tuple(skip_mask)), traced:
                out = self.mod.launch(*args)
                outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if trace:
                # lines of the candidate file that ran (under the interpreter kernel bodies too): the judge
                # uses them only against the candidate (a branch side it could not evaluate that never ran)
                diag["lines"] = sorted(lines)
                diag["positions"] = sorted(list(p) for p in spots)   # (line, col, end line, end col) ran
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            if profile:
                torch.cuda.profiler.stop()
        except self.guard_mod._KernelsOffAbort:
            diag["aborted"] = "too many launches with kernels off"
        except BaseException as exc:  # noqa: BLE001 - everything the candidate raises is an answer
            diag["error"] = f"{type(exc).__name__}: {_first_line(exc)}"
            diag["oom"] = isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()
            if guard.kernel_error is not None:
                diag["kernel_error"] = f"kernel {guard.kernel_error_name} failed: {type(exc).__name__}: " \
                                       f"{_first_line(exc)}"
            diag["traceback"] = traceback.format_exc(limit=4)[-1500:]
        try:   # module-level state this call changed (issue 34): the judge rejects a launcher that keeps any
            diag["state"] = self.state.changed()
        except Exception as exc:  # noqa: BLE001 - a value whose fingerprint fails is state the judge cannot check
            diag["state"] = [f"(unreadable module state: {type(exc).__name__})"]
        diag.update(launches=guard.launches, skipped=guard.skipped, side_stream=guard.side_stream_launches,
                    hooked=guard.hooked_launches, forbidden=guard.forbidden_ops(), ops=sorted(set(guard.ops)),
                    tampered=guard.tampered(), threads=list(self.threads),
                    scalar_reads=sum(1 for op in guard.ops if op in ("_local_scalar_dense", "item")))
        if outs is None:
            return {"outs": None, "inputs_after": args, "diag": diag}
        tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
        layout = []
        for o in outs:
            if not isinstance(o, torch.Tensor):
                layout.append({"type": type(o).__name__})
                continue
            entry = {"type": "Tensor" if type(o) is torch.Tensor else type(o).__name__,
                     "device": o.device.type,
                     "aliases_input": any(_overlaps(o, t) for t in tensors_in),
                     "internal_overlap": o.numel() > 1 and _internal_overlap(o),
                     "shares_earlier": any(_overlaps(o, e) for e in self.kept)}
            layout.append(entry)
        diag["layout"] = layout
        self.kept += [o for o in outs if isinstance(o, torch.Tensor) and not any(_overlaps(o, t) for t in tensors_in)]
        sendable = [o if isinstance(o, torch.Tensor) else None for o in outs]
        return {"outs": sendable, "inputs_after": args, "diag": diag}


class CompileNotes:
    """Tells the judge while a call's Triton compile runs (longer than ``after_s``, the hello's ``compile_notes``: a
    cache hit stays quiet): ``{"note": "compiling"}``, then ``{"note": "compiled"}``, after which the runner waits for
    the judge's ``{"op": "go"}``. The judge holds the device for the runner's calls; a compile uses only the CPU
    (the binary goes to the device at the first launch, after it), so meanwhile the judge gives the device back
    (``gpulock.step_aside``) and a timer of another job need not wait for the compile. Only during a call."""

    def __init__(self, wire, req, ans, after_s: float) -> None:
        self.wire, self.req, self.ans, self.after_s = wire, req, ans, after_s
        self.active = False

    def install(self) -> None:
        """Wrap ``triton.compiler.compile`` (what a kernel's launcher binds at its first launch) and ``triton.compile``;
        before the candidate is imported."""
        try:
            import triton
            import triton.compiler as tc
        except ImportError:
            return
        fn = getattr(tc, "compile", None)
        if fn is None or getattr(fn, "__tritondx_notes__", False):
            return
        wrapped = self.wrap(fn)
        tc.compile = wrapped
        if getattr(triton, "compile", None) is fn:
            triton.compile = wrapped

    def wrap(self, fn):
        notes = self

        def compiled(*args, **kwargs):
            if not notes.active:
                return fn(*args, **kwargs)
            gate = threading.Lock()
            state = {"done": False, "told": False}

            def tell() -> None:
                time.sleep(notes.after_s)
                with gate:
                    if not state["done"]:
                        notes.wire.send(notes.ans, {"note": "compiling"})
                        state["told"] = True

            _START_THREAD(tell, ())
            try:
                return fn(*args, **kwargs)
            finally:
                with gate:
                    state["done"] = True
                if state["told"]:
                    notes.wire.send(notes.ans, {"note": "compiled"})
                    go = notes.wire.recv(notes.req)
                    if go != {"op": "go"}:
                        raise RuntimeError(f"the judge answered {str(go)[:80]} to a compile note")

        compiled.__tritondx_notes__ = True
        return compiled


def main() -> int:
    req_fd, ans_fd, ev_fd = (int(x) for x in os.environ.pop("TRITONDX_RUNNER_FDS").split(","))
    return serve(req_fd, ans_fd, ev_fd, profiled=os.environ.pop("TRITONDX_RUNNER_PROFILED", "") == "1")


def _closable(fd: int, profiled: bool) -> bool:
    """Whether an inherited descriptor is closed before candidate code runs: all of them, except, under a
    profiler, the sockets and pipes its injected library opened in this process at start-up (closing
    them killed the runner under ncu 2025.3 on the H200: code 11, no output); files (a log) still close."""
    if not profiled:
        return True
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def _on_device(a, device: str, torch):
    """A staged input on the call's device with the layout it came with (storage, offset, sizes, strides), as a
    tensor the wire receives straight onto the device has it."""
    if not isinstance(a, torch.Tensor):
        return a
    storage = a.untyped_storage().to(device=device)
    return torch.empty(0, dtype=a.dtype, device=device).set_(storage, a.storage_offset(), a.size(), a.stride())


def serve(req_fd: int, ans_fd: int, ev_fd: int, profiled: bool = False) -> int:
    """The runner's protocol on these descriptors (a cold runner's, or a warm runner's forked child)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)     # the candidate's prints go to stderr, never into the protocol
    # nothing else inherited stays open (a profiler's log, a lock): the candidate gets only the protocol
    keep = (req_fd, ans_fd, ev_fd)
    for fd in range(3, 256):
        if fd not in keep and _closable(fd, profiled):
            try:
                os.close(fd)
            except OSError:
                pass
    req, ans = os.fdopen(req_fd, "rb"), os.fdopen(ans_fd, "wb")
    wire = _load_sibling("wire")
    staged: list[list] = []
    hello = wire.recv(req)
    if isinstance(hello, dict) and hello.get("op") == "preload":
        # a runner under a profiler (hwcheck): torch and Triton are imported before the profiler lock is taken;
        # nothing here touches CUDA (the driver, and the profiler's injected library with it, starts at the
        # first CUDA call, after the hello)
        try:
            import torch  # noqa: F401
            import triton  # noqa: F401
            import triton.language  # noqa: F401
        except BaseException as exc:  # noqa: BLE001
            wire.send(ans, {"ok": False, "error": f"{type(exc).__name__}: {_first_line(exc)}"})
            return 0
        wire.send(ans, {"ok": True, "preloaded": ["torch", "triton"]})
        hello = wire.recv(req)
        # the calls' inputs, sent before the profiler lock is taken and kept in host memory here (no CUDA before
        # the hello); a call names one by its index and it goes to the device then
        while isinstance(hello, dict) and hello.get("op") == "stage":
            staged.append(hello.get("args") or [])
            wire.send(ans, {"ok": True, "staged": len(staged)})
            hello = wire.recv(req)
    candidate = os.path.abspath("candidate.py")
    after = hello.get("compile_notes")   # seconds (a GPU judge), or absent
    notes_on = isinstance(after, (int, float)) and not isinstance(after, bool)
    notes = CompileNotes(wire, req, ans, float(after) if notes_on else 0.0)
    try:
        with open(candidate, "w") as f:
            f.write(hello["source"])
        if notes_on:
            notes.install()
        runner = Runner(candidate, hello, ev_fd)
    except BaseException as exc:  # noqa: BLE001
        wire.send(ans, {"ok": False, "error": f"{type(exc).__name__}: {_first_line(exc)}",
                        "traceback": traceback.format_exc(limit=4)[-1500:]})
        return 0
    wire.send(ans, {"ok": True, "tampered": runner.guard.tampered(), "threads": list(runner.threads)})
    device = hello["device"]
    pool = runner.pool if not hello.get("fresh") else None
    case = None   # the judge's staged case: its inputs as they came (bytes in host memory), decoded anew per call
    while True:
        try:
            body, blobs = wire.recv_raw(req)
        except EOFError:
            return 0
        if isinstance(body, dict) and body.get("op") == "stage_case":
            case = (body.get("args"), blobs)   # replaces the previous case's
            wire.send(ans, {"ok": True, "staged": "case"})
            continue
        staged_case = isinstance(body, dict) and body.get("staged") == "case"
        msg = wire.decode(body, blobs, device, None if staged_case else pool)   # (a staged call's inputs: below)
        op = msg.get("op")
        if op == "call":
            k = msg.get("staged")
            if k is not None and not (k == "case" and case is not None) \
                    and not (isinstance(k, int) and 0 <= k < len(staged)):
                wire.send(ans, {"outs": None, "diag": {"error": f"no staged inputs {k!r}"}})
                continue
            try:
                if k == "case":   # fresh tensors from the staged bytes (into the pool, as a sent call's are)
                    args = wire.decode(case[0], [bytearray(b) for b in case[1]] if device == "cpu" else case[1],
                                       device, pool)
                else:
                    args = msg["args"] if k is None else [_on_device(a, device, runner.torch) for a in staged[k]]
            except Exception as exc:  # noqa: BLE001
                wire.send(ans, {"outs": None, "diag": {"error": f"staged inputs to {device}: "
                                                                f"{type(exc).__name__}: {_first_line(exc)}"}})
                continue
            notes.active = True
            try:
                answer = runner.call(args, msg.get("skip_mask", []), bool(msg.get("skip_rest")),
                                     bool(msg.get("profile")), msg.get("trace") is True)
            finally:
                notes.active = False
            if msg.get("inputs_back") is False:
                answer["inputs_after"] = None
            packed = wire.Packed(answer)   # every device-to-host copy: the call's last device work
            if notes_on and packed.nbytes >= ANSWER_NOTE_BYTES:   # the bytes cross the pipe with the device given back
                wire.send(ans, {"note": "answering"})
            packed.write(ans)
        elif op == "reset":
            runner.kept.clear()
            runner.pool.clear()
            if hello["device"].startswith("cuda"):
                runner.torch.cuda.empty_cache()
            wire.send(ans, {"ok": True})
        else:
            return 0


if __name__ == "__main__":
    _profiled = os.environ.get("TRITONDX_RUNNER_PROFILED", "") == "1"
    _code = main()
    if _profiled:   # a profiler's injected library writes its report at a normal exit
        sys.exit(_code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)   # no interpreter teardown (torch's: ~1 s the judge waits for), no candidate exit handler
