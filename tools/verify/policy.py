"""Static source policy of a candidate against its original (run by the orchestrator, before any job).

A launcher computes its output with Triton kernels; it has no business starting threads or
processes, reaching into the interpreter (frames, modules, builtins, code objects), patching other
modules, or copying tensors to the host. The policy parses both files and rejects a candidate
that uses such a construct *and the original does not use it the same way* (the rule is about what
changed, so a task whose own launcher imports ``os`` keeps that right). It is a cheap first line:
the run-time checks (runner, judge, profiler on a GPU) catch the same classes when the source hides
them, and they do not rely on it.
"""

from __future__ import annotations

import ast

# Substring rules: source constructs a launcher may not use to produce or time its output.
STATIC_RULES = {
    "timing_tampering": ("do_bench =", "perf_counter =", "Event.elapsed_time =", "Event.record =",
                         "synchronize =", "time.time =", "elapsed_time =", "perf_counter_ns =", "monotonic =",
                         "__code__ ="),
    "side_stream": ("torch.cuda.Stream(", "torch.cuda.stream(", "Stream(", "set_stream", "ExternalStream",
                    "get_current_stream"),
    "l2_persistence": ("accessPolicyWindow", "persisting_l2", "cudaLimitPersistingL2CacheSize",
                       "set_per_process_memory_fraction"),
    # Reaching into the verifier's machinery, rewriting a function's code object, running Python
    # inside a Triton launch, or allocating memory that bypasses the dispatcher (and its poisoning).
    "verifier_tampering": ("tritondx.", "import tritondx", "_python_dispatch", "TorchDispatchMode",
                           "_set_dispatch_mode", "_pop_mode", "sys.modules", "gc.get_objects",
                           "gc.get_referrers", "__code__", "add_pre_run_hook", "launch_enter_hook",
                           "launch_exit_hook", "in_triton", "UntypedStorage"),
    # Computing on the host outside torch's dispatcher (invisible to the op recorder).
    "host_compute": (".numpy(", "from_numpy", ".tolist(", "import numpy", "cupy", "numba", "__array__",
                     "dlpack"),
}

#: modules whose import (of the module or from it) a candidate may not add, by rejection class
DENY_MODULES = {
    "threads": ("threading", "_thread", "concurrent", "multiprocessing", "asyncio", "signal"),
    "verifier_tampering": ("os", "sys", "importlib", "builtins", "gc", "inspect", "types", "ctypes", "traceback",
                           "pickle", "marshal", "tritondx", "weakref", "code", "codeop", "runpy", "pkgutil",
                           "subprocess", "socket", "mmap", "io", "pathlib", "shutil", "tempfile", "atexit",
                           "faulthandler", "resource", "fcntl", "posix", "_posixsubprocess", "sysconfig", "site"),
    "host_compute": ("numpy", "cupy", "numba", "jax", "scipy", "array"),
    # a launcher that reads where and when it runs can be honest inside the verifier's runner and wrong
    # anywhere else (a thread count, a clock, a random draw): no run-time check sees what does not run there
    "environment_probe": ("time", "datetime", "random", "platform", "uuid", "getpass", "locale", "secrets",
                          "calendar", "zoneinfo", "psutil"),
}
#: attributes that read the process's environment (threads, seeds, memory, devices, modes), by the
#: same reasoning as the environment_probe modules
PROBE_ATTRS = ("get_num_threads", "get_num_interop_threads", "set_num_threads", "initial_seed", "get_rng_state",
               "cpu_count", "getpid", "is_grad_enabled", "is_inference_mode_enabled", "is_inference",
               "are_deterministic_algorithms_enabled", "get_default_dtype", "get_default_device", "device_count",
               "memory_allocated", "memory_reserved", "max_memory_allocated", "mem_get_info", "memory_stats",
               "is_initialized", "current_device", "getenv", "environ")
#: builtins a candidate may not add (reflection, dynamic code, files)
DENY_NAMES = ("vars", "getattr", "setattr", "delattr", "eval", "exec", "compile", "globals", "locals",
              "__import__", "open", "breakpoint", "memoryview", "__builtins__", "__loader__", "__spec__", "dir",
              "type")
#: attributes a candidate may not add (frames, interpreter internals, host copies, torch internals)
DENY_ATTRS = ("_getframe", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
              "ag_frame", "_C", "_ops", "ops", "library", "numpy", "tolist", "data_ptr", "untyped_storage",
              "storage", "_utils", "_dynamo", "_inductor", "compile", "profiler", "autograd", "overrides",
              "jit", "fx", "testing", "knobs", "cuda_stream", "elapsed_time",
              "set_", "as_strided", "share_memory_", "from_file", "pin_memory")


def _features(tree: ast.AST) -> dict[str, tuple[str, int]]:
    """Feature name -> (rejection class, first line) for every policy-relevant construct."""
    feats: dict[str, tuple[str, int]] = {}
    imported: set[str] = set()

    def add(name: str, klass: str, node: ast.AST) -> None:
        feats.setdefault(name, (klass, getattr(node, "lineno", 0)))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                add("relative import", "verifier_tampering", node)
            for m in mods:
                root = m.split(".")[0]
                for klass, deny in DENY_MODULES.items():
                    if root in deny:
                        add(f"import {root}", klass, node)
            for a in node.names:
                imported.add((a.asname or a.name).split(".")[0])
                if isinstance(node, ast.ImportFrom) and a.name in PROBE_ATTRS:
                    add(f"`{a.name}`", "environment_probe", node)
        elif isinstance(node, ast.Name) and node.id in DENY_NAMES:
            add(f"`{node.id}`", "verifier_tampering", node)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                add(f"`.{node.attr}`", "verifier_tampering", node)
            elif node.attr in PROBE_ATTRS:
                add(f"`.{node.attr}`", "environment_probe", node)
            elif node.attr in DENY_ATTRS:
                add(f"`.{node.attr}`", "host_compute" if node.attr in ("numpy", "tolist") else "verifier_tampering",
                    node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            add(f"string {node.value[:30]!r}", "verifier_tampering", node)
    # assigning to (or deleting) an attribute of an imported module or of what it holds: monkeypatching
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            root = t
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if t is not root and isinstance(root, ast.Name) and root.id in imported:
                add(f"assignment to `{ast.unparse(t)[:60]}`", "verifier_tampering", node)
    return feats


def _launch_rules(tree: ast.Module, orig: ast.Module) -> tuple[str, str] | None:
    launch = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    orig_launch = next((n for n in orig.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if launch is None:
        return None
    has_try = any(isinstance(n, ast.Try) for n in ast.walk(launch))
    had_try = orig_launch is not None and any(isinstance(n, ast.Try) for n in ast.walk(orig_launch))
    if has_try and not had_try:
        return "torch_fallback", "launch() wraps work in try/except (a fallback path the timer may take)"
    for n in ast.walk(launch):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "reference":
            return "calls_reference", "launch() calls reference()"
    if any(isinstance(n, ast.Global) for n in ast.walk(launch)):
        return "caches_outputs", "launch() writes module globals (output caching)"
    return None


def check(candidate_source: str, original_source: str) -> tuple[str, str] | None:
    """(rejection class, one-line reason) for the first rule the candidate breaks; None when clean."""
    for klass, needles in STATIC_RULES.items():
        for n in needles:
            if n in candidate_source and n not in original_source:
                return klass, f"candidate source uses `{n.strip()}`"
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as exc:
        return "syntax_error", f"candidate does not parse: line {exc.lineno}: {exc.msg}"
    except RecursionError:
        return "syntax_error", "candidate source is nested too deeply to parse"
    orig = ast.parse(original_source)
    bad = _launch_rules(tree, orig)
    if bad:
        return bad
    allowed = _features(orig)
    for name, (klass, line) in _features(tree).items():
        if name not in allowed:
            return klass, f"candidate source uses {name} (line {line}), which the original does not"
    return None
