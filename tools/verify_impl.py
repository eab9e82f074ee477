"""Correctness and integrity checks of one candidate (runs inside the sandboxed worker).

The original task supplies the reference, the input maker, the shapes and the tolerances; the
candidate supplies only its kernels and launcher. For every dtype and shape, two fresh seeds:
inputs are random (never zeros), the candidate runs first (so no freed reference output can be
picked up), with fresh allocations poisoned, under the launch guard; then the reference runs on
clones. Rejections carry a class and a one-line reason.

Each call is paired with a kernels-off call (every Triton launch gets an empty grid; which of the
two runs first is random): an output that is still correct without any kernel body running was
computed some other way (numpy, Python, hidden torch), whatever the op recorder saw. Every output
of a shape is kept alive while that shape is checked, so an output that shares memory with an
earlier one (a cache) is recognised exactly; an output that equals an earlier seed's reference is
stale.
"""

from __future__ import annotations

import contextlib
import random
import re
from pathlib import Path
from typing import Any

import torch

from tritondx.tools.gpulock import phase
from tritondx.tools.guard import LaunchGuard, _KernelsOffAbort
from tritondx.tools.taskmod import as_tuple, dtype_name, load_module, norm_shape, tolerance, to_dtype
from tritondx.tools.verify.buffers import degenerate_inputs
from tritondx.tools.verify.cases import make_case_inputs, plan_checks
from tritondx.tools.verify.coverage import LineTracer, trace_verdict

SEEDS_PER_SHAPE = 2


class Rejected(Exception):
    def __init__(self, klass: str, reason: str):
        self.klass = klass
        self.reason = reason
        super().__init__(f"{klass}: {reason}")


@contextlib.contextmanager
def device_phase(device: str):
    """Hold the device (shared) for a block of checks, then give the caching allocator's memory back
    to the device: jobs of a batch share one GPU, and memory a job keeps reserved between its checks
    made honest candidates of other jobs run out of memory (16 of 153 verifications on the H200,
    2026-11-30)."""
    with phase("shared"):
        try:
            yield
        finally:
            if device.startswith("cuda"):
                import gc
                gc.collect()
                torch.cuda.empty_cache()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _check_inputs(inputs: tuple, where: str, reference) -> None:
    degenerate = degenerate_inputs(reference, inputs)
    if degenerate:
        raise Rejected("bad_inputs", f"{where}: {degenerate[0]}")


def compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> dict[str, Any] | None:
    """None when out matches ref within tolerance; else where and by how much it differs."""
    if out.shape != ref.shape:
        return {"reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype {out.dtype} != reference {ref.dtype}"}
    if out.numel() == 0:
        return None
    o = out.detach().to(torch.float64) if out.dtype != torch.bool else out.detach().to(torch.int64).double()
    r = ref.detach().to(torch.float64) if ref.dtype != torch.bool else ref.detach().to(torch.int64).double()
    o_fin, r_fin = torch.isfinite(o), torch.isfinite(r)
    bad_nonfinite = (~o_fin) & r_fin
    if bool(bad_nonfinite.any()):
        idx = int(torch.nonzero(bad_nonfinite.flatten())[0])
        return {"reason": f"NaN/Inf where the reference is finite ({int(bad_nonfinite.sum())} elements; "
                          f"first at flat index {idx}: got {o.flatten()[idx].item()}, want {r.flatten()[idx].item()})"}
    same_special = (~r_fin) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
    diff = (o - r).abs()
    allowed = atol + rtol * r.abs()
    bad = (diff > allowed) & r_fin | ((~r_fin) & ~same_special)
    if bool(bad.any()):
        flat = torch.where(bad.flatten(), diff.flatten().nan_to_num(float("inf")), torch.zeros_like(diff.flatten()))
        idx = int(torch.argmax(flat))
        unravel = []
        rem = idx
        for s in reversed(out.shape):
            unravel.append(rem % s)
            rem //= s
        return {
            "reason": f"{int(bad.sum())}/{out.numel()} elements off; worst at {tuple(reversed(unravel))}: "
                      f"got {o.flatten()[idx].item():.6g}, want {r.flatten()[idx].item():.6g} "
                      f"(atol={atol}, rtol={rtol})",
            "max_abs_err": float(diff[r_fin].max()) if bool(r_fin.any()) else 0.0,
        }
    return None


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _aliases(out: torch.Tensor, inputs: tuple) -> bool:
    o0, o1 = _storage_span(out)
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            i0, i1 = _storage_span(t)
            if o0 < i1 and i0 < o1:
                return True
    return False


def _unchanged(t: torch.Tensor, before: torch.Tensor) -> bool:
    """``t`` still holds what ``before`` holds. NaN counts as equal to NaN: ``torch.equal`` alone
    calls every input holding a NaN (e.g. an isfinite task's inputs) modified."""
    if t.is_floating_point() or t.is_complex():
        nan, nan_before = torch.isnan(t), torch.isnan(before)
        return torch.equal(nan, nan_before) and torch.equal(t.masked_fill(nan, 0), before.masked_fill(nan_before, 0))
    return torch.equal(t, before)


def _internal_overlap(t: torch.Tensor) -> bool:
    """True when two elements of ``t`` share memory (an expanded / stride-0 or overlapping view)."""
    fn = getattr(torch._C, "_debug_has_internal_overlap", None)
    if fn is not None:
        return fn(t) == 1  # 0: no, 1: yes, 2: too hard to tell
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def _is_constant(t: torch.Tensor) -> bool:
    """True when every element of ``t`` is the same value (then an untouched fill can match it)."""
    if t.numel() <= 1:
        return True
    flat = t.detach().flatten()
    return bool(torch.all((flat == flat[0]) | (torch.isnan(flat) & torch.isnan(flat[0]))))


_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory")


def _call_candidate(cand, inputs: tuple, guard: LaunchGuard, device: str, where: str,
                    skip_kernels: bool) -> tuple | None:
    """One watched call of the candidate's launch. The kernels-off call returns None when it fails."""
    try:
        with guard.watch(skip_kernels=skip_kernels):
            outs = as_tuple(cand.launch(*inputs))
        _sync(device)
    except _KernelsOffAbort:
        return None
    except Exception as exc:
        if skip_kernels:
            return None  # e.g. a launcher that reads back a value only a kernel writes
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        # Under the interpreter invalid kernel code surfaces as an InterpreterError while the kernel
        # runs, on a GPU as a CompilationError: either way the kernel is not valid Triton.
        if guard.kernel_error is not None:
            raise Rejected("compile_error", f"{where}: kernel {guard.kernel_error_name} failed: "
                                            f"{type(exc).__name__}: {first}") from exc
        if isinstance(exc, MemoryError) or any(m in str(exc).lower() for m in _OOM_TEXT):
            raise Rejected("out_of_memory", f"{where}: launch() ran out of memory: {type(exc).__name__}: "
                                            f"{first}") from exc
        raise
    return outs


def verify(job: dict[str, Any]) -> dict[str, Any]:
    device = job["device"]
    orig = load_module(job["task"], "orig")
    guard = LaunchGuard()
    guard.install()
    # Torch ops the initial launcher itself uses are allowed to the candidate too.
    guard.allowed_extra_ops = set(job.get("allowed_ops", []))
    cand = load_module(job["candidate"], "cand") if job["candidate"] != job["task"] else orig
    tampered = guard.tampered()
    if tampered:
        raise Rejected("timing_tampering", f"importing the candidate replaced {', '.join(tampered)}")
    # The cases (listed shapes, derived sizes, branch sides, value stress; fresh seeds): tools/verify/cases.py
    plan = plan_checks(orig, Path(job["task"]).read_text(), Path(job["candidate"]).read_text(), device,
                       include_bench=bool(job.get("include_bench")))
    groups: dict[tuple[str, str], list] = {}
    for case in plan.cases:   # one group per dtype and shape: the cache checks compare within a group
        groups.setdefault((case.dtype, repr(case.shape)), []).append(case)
    # Which of the two runs (kernels on / off) goes first: its own random stream, so the input
    # seeds stay what they were for a given job seed.
    order_rng = random.Random(f"kernels-off order {job.get('seed', 0)}")
    tracer = LineTracer(str(Path(job["candidate"]).resolve()))
    checks = []
    ops_seen: set[str] = set()
    for group in groups.values():
        dtype = to_dtype(group[0].dtype)
        shape = group[0].shape
        with device_phase(device):  # a timer in another job waits for this shape's checks only
            earlier_outs: list[torch.Tensor] = []   # kept alive: shared storage then means "same memory"
            earlier_refs: list[tuple[int, tuple]] = []
            for case in group:
                seed = case.seed
                where = f"{case.label()} seed {seed}"
                inputs = make_case_inputs(orig, case, device)
                if case.values == "normal":
                    _check_inputs(inputs, where, orig.reference)
                snapshot = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
                _sync(device)
                off_first = order_rng.random() < 0.5
                if off_first:
                    outs_off = _call_candidate(cand, inputs, guard, device, where, skip_kernels=True)
                    if guard.tampered():
                        raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(guard.tampered())}")
                with tracer:
                    outs = _call_candidate(cand, inputs, guard, device, where, skip_kernels=False)
                ops_seen.update(guard.ops)
                launches = guard.launches
                if guard.launches == 0:
                    raise Rejected("no_triton_kernel", f"{where}: launch() ran no Triton kernel")
                if guard.side_stream_launches:
                    raise Rejected("side_stream", f"{where}: {guard.side_stream_launches} kernel launch(es) on a "
                                                  "non-default stream the timer does not see")
                forbidden = guard.forbidden_ops()
                if forbidden:
                    raise Rejected("torch_compute", f"{where}: launch() called torch compute ops {forbidden[:6]} "
                                                    "(outputs must come from Triton kernels)")
                if guard.tampered():
                    raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(guard.tampered())}")
                if guard.hooked_launches:
                    raise Rejected("verifier_tampering", f"{where}: {guard.hooked_launches} Triton launch(es) ran "
                                                         "Python hooks (pre-run / launch hooks run unobserved)")
                if not off_first:
                    outs_off = _call_candidate(cand, inputs, guard, device, where, skip_kernels=True)
                    if guard.tampered():
                        raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(guard.tampered())}")
                for i, (t, s) in enumerate(zip(inputs, snapshot)):
                    if isinstance(t, torch.Tensor) and not _unchanged(t, s):
                        raise Rejected("mutates_inputs", f"{where}: input {i} was modified by launch()")
                refs = as_tuple(orig.reference(*[s.clone() if isinstance(s, torch.Tensor) else s for s in snapshot]))
                _sync(device)
                if len(outs) != len(refs):
                    raise Rejected("wrong_output", f"{where}: launch() returned {len(outs)} outputs, "
                                                   f"reference {len(refs)}")
                for i, (o, r) in enumerate(zip(outs, refs)):
                    if type(o) is not torch.Tensor:
                        raise Rejected("lazy_output", f"{where}: output {i} is {type(o).__name__}, "
                                                      "not a plain torch.Tensor")
                    aliased = _aliases(o, inputs)
                    if aliased and not _aliases(r, snapshot):
                        raise Rejected("aliased_output", f"{where}: output {i} aliases an input's memory")
                    if o.numel() > 1 and _internal_overlap(o) and not _internal_overlap(r):
                        raise Rejected("aliased_output", f"{where}: output {i} is an expanded/overlapping view "
                                                         f"(strides {tuple(o.stride())}): elements share memory, "
                                                         "so it was not computed element by element")
                    if o.numel() > 0 and not aliased:
                        o_span = _storage_span(o)
                        for e in earlier_outs + [t for t in (outs_off or ()) if type(t) is torch.Tensor]:
                            if e.numel() > 0 and _storage_span(e)[0] < o_span[1] and o_span[0] < _storage_span(e)[1]:
                                raise Rejected("caches_outputs", f"{where}: output {i} shares memory with an output "
                                                                 "of an earlier call (a cached or reused output; "
                                                                 "launch() must return fresh tensors)")
                    if o.device.type != torch.device(device).type:
                        raise Rejected("wrong_output", f"{where}: output {i} is on {o.device}, want {device}")
                    atol, rtol = tolerance(orig, dtype, output=i)
                    bad = compare(o, r, atol, rtol)
                    if bad:
                        for old_seed, old_refs in earlier_refs:
                            if i < len(old_refs) and compare(o, old_refs[i], atol, rtol) is None:
                                raise Rejected("caches_outputs", f"{where}: output {i} equals the reference of an "
                                                                 f"earlier call (seed {old_seed}), not of this one: "
                                                                 "a stale or cached output")
                        raise Rejected("mismatch", f"{where}: output {i}: {bad['reason']}")
                    # Kernels off: the same call with every Triton launch given an empty grid.
                    if (outs_off is not None and i < len(outs_off) and type(outs_off[i]) is torch.Tensor
                            and not aliased and not _is_constant(r)
                            and compare(outs_off[i], r, atol, rtol) is None):
                        raise Rejected("not_from_triton", f"{where}: output {i} is still correct when no Triton "
                                                          "kernel body runs: it was computed outside Triton "
                                                          "kernels (numpy, Python or unrecorded torch)")
                earlier_outs += [t for t in outs + (outs_off or ()) if type(t) is torch.Tensor]
                earlier_refs.append((seed, refs))
                checks.append({"shape": list(shape) if isinstance(shape, tuple) else shape,
                               "dtype": str(dtype), "seed": seed, "launches": launches, "values": case.values,
                               "why": case.why})
            earlier_outs.clear()  # drop this shape's tensors before the device memory is handed back
            earlier_refs.clear()
            inputs = snapshot = outs = outs_off = refs = None  # noqa: F841
    # Every case passed; an added branch side no case reached still leaves code unchecked.
    unchecked = plan.rejection()
    if unchecked:
        raise Rejected(*unchecked)
    traced = trace_verdict(plan.branches, tracer.lines, kernel_lines_traced=not device.startswith("cuda"))
    if traced:
        raise Rejected("unchecked_branch", "; ".join(traced[:3])[:600])
    return {"passed": True, "checks": checks, "ops": sorted(ops_seen), "coverage": plan.summary()}


def _user_call(what: str, fn, *args) -> tuple[Any, str | None]:
    """Call task code; (result, None), or (None, one-line problem) for anything it raises or exits with."""
    try:
        return fn(*args), None
    except SystemExit as exc:
        return None, f"{what} called sys.exit({exc.code!r})"
    except (MemoryError, RuntimeError) as exc:
        text = " ".join(str(exc).split())
        if isinstance(exc, MemoryError) or any(m in text.lower() for m in _OOM_TEXT):
            asked = re.search(r"tried to allocate (\d+) bytes", text)
            size = f" (asked for {int(asked.group(1)) / 2 ** 30:.1f} GiB)" if asked else ""
            return None, (f"{what} ran out of memory{size}: the shape is too large for this device "
                          f"({type(exc).__name__})")
        return None, f"{what} raised {type(exc).__name__}: {text[:300]}"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return None, f"{what} raised {type(exc).__name__}: {first[:300]}"


def probe(job: dict[str, Any]) -> dict[str, Any]:
    """Check what a task's format cannot show statically; record the ops the launcher uses.

    Every problem is answered as ``{"ok": False, "problem": <one line>}``: task code that raises,
    exits, runs out of memory, returns the wrong kind of thing, or whose kernel does not compile
    (named with its source line)."""
    path = job["task"]
    device = job["device"]
    with device_phase(device):
        return _probe(path, device)


def _probe(path: str, device: str) -> dict[str, Any]:
    mod = load_module(path, "probe")
    for name in ("CHECK_SHAPES", "BENCH_SHAPES", "DTYPES"):
        value = getattr(mod, name)
        if not isinstance(value, (list, tuple)) or not value:
            return {"ok": False, "problem": f"{name} must be a non-empty list, got {type(value).__name__}"}
    try:
        dtypes = [to_dtype(d) for d in mod.DTYPES]
    except ValueError as exc:
        return {"ok": False, "problem": f"DTYPES: {exc}"}
    for d in dtypes:
        try:
            tolerance(mod, d)
        except Exception as exc:
            return {"ok": False, "problem": getattr(exc, "problem", None) or str(exc)}
    shape = norm_shape(mod.CHECK_SHAPES[0])
    call = f"make_inputs({shape!r}, {dtype_name(dtypes[0])}, seed=1234, device={device!r})"
    raw, problem = _user_call(call, mod.make_inputs, shape, dtypes[0], 1234, device)
    if problem:
        return {"ok": False, "problem": problem}
    inputs = as_tuple(raw)
    if not inputs or not all(isinstance(t, (torch.Tensor, int, float, bool)) for t in inputs):
        kinds = sorted({type(t).__name__ for t in inputs})
        return {"ok": False, "problem": f"make_inputs must return tensors (and plain scalars), got {kinds}"}
    if not any(isinstance(t, torch.Tensor) for t in inputs):
        return {"ok": False, "problem": "make_inputs returned no tensor"}
    degenerate = degenerate_inputs(mod.reference, inputs)
    if degenerate:
        return {"ok": False, "problem": f"{call}: {degenerate[0]}"}
    raw, problem = _user_call("reference", mod.reference, *[t.clone() if isinstance(t, torch.Tensor) else t
                                                            for t in inputs])
    if problem:
        return {"ok": False, "problem": problem}
    refs = as_tuple(raw)
    if not refs or not all(isinstance(r, torch.Tensor) for r in refs):
        kinds = sorted({type(r).__name__ for r in refs})
        return {"ok": False, "problem": f"reference must return tensors, got {kinds}"}
    guard = LaunchGuard()
    guard.install()
    try:
        with guard.watch(poison=False):
            outs = as_tuple(mod.launch(*inputs))
        _sync(device)
    except SystemExit as exc:
        return {"ok": False, "problem": f"launch called sys.exit({exc.code!r})"}
    except Exception as exc:
        if guard.kernel_error is not None:
            from tritondx.tools.kernel_errors import describe_kernel_error
            return {"ok": False, "problem": describe_kernel_error(guard.kernel_error, path, guard.kernel_error_name)}
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"ok": False, "problem": f"launch raised {type(exc).__name__}: {first[:300]}"}
    if guard.launches == 0:
        return {"ok": False, "problem": "launch ran no Triton kernel"}
    if len(outs) != len(refs):
        return {"ok": False, "problem": f"launch returned {len(outs)} outputs, reference {len(refs)}"}
    for i, (o, r) in enumerate(zip(outs, refs)):
        try:
            atol, rtol = tolerance(mod, dtypes[0], output=i)
        except Exception as exc:
            return {"ok": False, "problem": getattr(exc, "problem", None) or str(exc)}
        if not isinstance(o, torch.Tensor):
            return {"ok": False, "problem": f"launch output {i} is {type(o).__name__}, not a tensor"}
        if o.shape != r.shape or o.dtype != r.dtype:
            return {"ok": False, "problem": f"launch output {i} is {tuple(o.shape)} {o.dtype}, "
                                            f"reference gives {tuple(r.shape)} {r.dtype}"}
        # The initial kernel is the baseline every candidate is measured against: it must be right.
        bad = compare(o, r, atol, rtol)
        if bad:
            return {"ok": False, "problem": f"the initial launch does not match the reference on {call}: "
                                            f"output {i}: {bad['reason']}"}
    return {"ok": True, "ops": sorted(set(guard.ops)), "launches": guard.launches,
            "dtypes": [dtype_name(d) for d in dtypes],
            "tolerances": {dtype_name(d): list(tolerance(mod, d)) for d in dtypes},
            "n_inputs": len(inputs), "n_outputs": len(outs)}
